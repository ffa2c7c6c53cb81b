// Package exp is what the lab's experiments share: the skeleton each one
// (a package under exp/) fills in. An experiment has a Config whose zero
// fields take defaults and whose Validate method reports a wrong setting
// as a FieldError (wrapping ErrConfig) naming it as the CLI's flag does;
// a Run that fills the defaults, validates, starts what it reads through
// a Rig (closed with one defer), and runs its steps (exp.Run);
// and a Report that opens with a Header (experiment, version, Environment)
// and renders itself as a section of the HTML page (Sectioner, WriteHTML).
// The client side is shared too: AcceptValue, Read and Fetch read the
// fixtures as the lab client does, Work reconciles the client's attempts
// with the fixtures' counters, and GatewayAttempts reads the gateway's.
package exp
