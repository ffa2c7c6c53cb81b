// Package report writes the lab's findings as one self-contained HTML page:
// latency CDFs of baseline against hedged reads, the frontier of tail latency
// against extra work, overload amplification, timelines and tables, which an
// engineer opens in a browser or prints.
//
// The page has no scripts, no fonts to fetch and no network references: plots
// are inline SVG and the styling is one inline <style> block, so the file can
// be mailed, attached to a ticket or archived next to the JSON results and it
// will still render the same in ten years. Hovering a marker shows its values
// through the SVG <title> element, which needs no JavaScript either.
// Long unbroken strings, such as latency model specifications and URLs,
// wrap in headings, paragraphs and table cells rather than widen the page.
//
// # Building a page
//
// A Page holds header facts (Meta: seed, configuration, Go version, cores,
// date) and Sections; a Section holds a paragraph, Plots and Tables. A Plot
// holds Series of points, optional Notes (labelled points such as a "knee")
// and a Caption that says in one sentence how to read it. CDF turns raw
// latencies into a downsampled cumulative-distribution Series that keeps the
// tail: half of its points or more describe the slowest tenth of requests,
// which is where hedging acts. CDFOutOf does the same out of a total count of
// requests, so that requests without a latency (failed, timed out) keep the
// curve below 1 instead of vanishing.
//
// RenderHTML writes the page. It is deterministic, so the same Page gives the
// same bytes and reports can be diffed and checked in.
//
// # Plots
//
// Axes are linear with "nice" ticks (1, 2 or 5 × 10^k) or, with LogX and
// LogY, base-10 logarithmic with decades labelled and 2 and 5 sub-ticks, since
// latency spans orders of magnitude and the tail is what matters. A zero
// XMin/XMax (or YMin/YMax) pair means an automatic range from the data.
// Series take colours from the Okabe–Ito palette, which stays distinguishable
// for the common forms of colour blindness, and may be dashed (a baseline) or
// solid (the treatment), so the plot still reads in black and white.
//
// Rendering never fails because of the data: NaN and infinite values, and
// non-positive values on a log axis, are left out and counted in a footnote;
// a plot without data says "no data"; a single point is drawn as a marker and
// a flat series gets a padded range. Every string is escaped, so a series
// named "<script>" is shown as text. Only a failing writer makes RenderHTML
// return an error.
package report
