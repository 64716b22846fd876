package client

import (
	"context"
	"testing"
)

// The reasons' strings are metric label values that dashboards, alert rules and docs name:
// they are pinned here, and a change must be a new reason, never a renamed one.
func TestReasonLabelValues(t *testing.T) {
	drops := map[DropReason]string{
		DropRejected: "rejected", DropAckTimeout: "ack_timeout", DropRetryExhausted: "retry_exhausted",
		DropStreamBroken: "stream_broken", DropTooLarge: "too_large", DropInvalid: "invalid",
		DropShutdownQueued: "shutdown_queued", DropShutdownPending: "shutdown_pending", DropShutdownRetry: "shutdown_retry",
		DropStreamPoison: "stream_poison",
	}
	if len(drops) != int(numDropReasons) {
		t.Fatalf("%d drop reasons pinned, %d defined", len(drops), numDropReasons)
	}
	for r, want := range drops {
		if got := r.String(); got != want {
			t.Errorf("DropReason(%d) = %q, want %q", r, got, want)
		}
		if got, want := r.AtShutdown(), r >= DropShutdownQueued && r <= DropShutdownRetry; got != want {
			t.Errorf("%s.AtShutdown() = %v", r, got)
		}
	}
	retries := map[RetryReason]string{RetryFailed: "failed_retryable", RetryThrottled: "throttled", RetryAckTimeout: "ack_timeout"}
	if len(retries) != int(numRetryReasons) {
		t.Fatalf("%d retry reasons pinned, %d defined", len(retries), numRetryReasons)
	}
	for r, want := range retries {
		if got := r.String(); got != want {
			t.Errorf("RetryReason(%d) = %q, want %q", r, got, want)
		}
	}
	if DropReason(200).String() != "unknown" || RetryReason(200).String() != "unknown" {
		t.Error("an out-of-range reason must not index past the names")
	}
}

// The lifecycle moves forward only, by the documented steps: Start after Shutdown starts
// nothing, a second Shutdown or a Handover after it fails, and Shutdown ends in stopped.
func TestDestLifecycle(t *testing.T) {
	newDest := func(name string) *Dest {
		cfg := DefaultConfig()
		cfg.Name, cfg.Endpoint = name, "127.0.0.1:1"
		d, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := newDest("lifecycle_a")
	if s := d.state.load(); s != stateCreated {
		t.Fatalf("after New: %s", s)
	}
	d.Start()
	if s := d.state.load(); s != stateRunning {
		t.Fatalf("after Start: %s", s)
	}
	d.Start() // a second Start does nothing
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := d.state.load(); s != stateStopped {
		t.Fatalf("after Shutdown: %s", s)
	}
	if err := d.Shutdown(context.Background()); err == nil {
		t.Error("a second Shutdown did not fail")
	}
	if err := d.Handover(context.Background(), nil); err == nil {
		t.Error("Handover after Shutdown did not fail")
	}
	d.Start()
	if s := d.state.load(); s != stateStopped {
		t.Fatalf("Start after Shutdown moved the state to %s", s)
	}

	// Shut down before it was started: no sender ever runs, nothing waits.
	e := newDest("lifecycle_b")
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Start()
	if s := e.state.load(); s != stateStopped {
		t.Fatalf("Start after an early Shutdown: %s", s)
	}
	if s := lifecycle(99).String(); s != "unknown" {
		t.Errorf("lifecycle(99) = %q", s)
	}
}
