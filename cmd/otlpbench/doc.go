// Command otlpbench is otlpgate's benchmark and load tool:
//
//	otlpbench appendix   the OTLP specification's Appendix B on otlpgate's client and server
//	otlpbench proxy      load -> otlpgate -> sink, against load -> sink, and optionally a peer proxy
//	otlpbench anchor     CPU per span of otlpgate and the Collector pinned to one core, against a TCP relay
//	otlpbench sweep      CPU per span, latency and peak RSS from 1k spans/s to a closed loop, and idle CPU
//	otlpbench relay      a TCP relay that copies bytes without looking at them (anchor's floor)
//	otlpbench load       an OTLP trace load generator (v1 unary or OTEP stream)
//	otlpbench sink       a counting OTLP trace receiver
//	otlpbench delay      a TCP delay line on loopback (used by appendix, in its own process)
//
// `otlpbench COMMAND -help` lists a command's flags.
//
// Nothing imports it; it imports bench/ and the packages it measures.
package main
