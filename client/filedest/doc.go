// Package filedest is otlpgate's file destination (-dest protocol=file, and the default when no
// -dest is given): it writes every batch to a local file as OTLP/JSON, one export request per
// line, rotating the file by size, and logs a one-line summary at a fixed interval.
//
// A batch is reported delivered (Done(true)) only once its line was handed to the operating
// system with write(2): the writer gathers what is queued into one buffer, writes it with one
// call, then finishes the whole burst. A process killed after that keeps the line (the page
// cache belongs to the kernel); the file is not fsynced, so a power loss may not. An I/O error
// (a full disk, a failed rename or open) costs the batches of that write only, finished with
// Done(false) and counted in otlpgate_file_failed_items_total by reason; the file is closed, a
// half-written line is cut off, and the next batch opens the file again, so the destination
// recovers by itself once the disk does.
//
// It imports fastpath/, proto/, pool and client, whose per-destination counters it reports
// through, so that /status.json and the status page show it as any destination. One writer goroutine owns the file (fs.go is the seam
// through which tests put failures between it and the disk); Enqueue is safe for concurrent
// use.
package filedest
