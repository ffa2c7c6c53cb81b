// Package lab is the home of Tailgate's lab: it measures hedging honestly,
// against controlled replicas on 127.0.0.1 and real endpoints, and reports
// what each policy gains in latency and costs in duplicate work. It holds
// no code of its own; its packages, lowest first (a package imports only
// those above it in this list):
//
//   - sim: virtual servers, for fleet-scale runs without sockets.
//   - report: the HTML page (plots, tables) that experiments render into.
//   - fixture: the controlled replica, its latency models (ParseModel) and
//     its FIFO capacity queue; the models also feed the simulator.
//   - load: the open- and closed-loop load generator, and the summary of
//     its outcomes.
//   - exp: the skeleton every experiment shares: report header and
//     environment, configuration errors that name the setting, the
//     run-and-report steps, the lab client, work reconciliation.
//   - exp/<name>: one experiment each (compare, straggler, sweep,
//     overload, fanout, bigtable, tied, probation, skew, classes) with its Config,
//     Validate, Run and Report; exp/demo runs short versions of three of
//     them for "tailgate demo".
//
// The command line (cmd/tailgate) maps flags onto an experiment's Config
// and prints what its Validate refuses: the limits live in the lab, once.
//
// The lab stands beside the command, above the library and the gateway it
// measures, and imports them as any user would; nothing below imports it.
// Its packages are the lab's own, not an API: they change with the
// experiments, with no promise of compatibility.
package lab
