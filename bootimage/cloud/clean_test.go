package cloud_test

import (
	"testing"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
)

// TestCleanMessage: a vCenter error that carries a session UUID and a time says the same on
// every retry once cleaned, so its Event is not repeated.
func TestCleanMessage(t *testing.T) {
	first := cloud.CleanMessage("ServerFaultCode: session 52d5a0c4-1f3e-4b2a-9c1d-0e8f7a6b5c4d expired at 2026-12-01T10:00:01Z")
	again := cloud.CleanMessage("ServerFaultCode: session 7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d expired at 2026-12-01T10:05:09.123Z")
	if first != again {
		t.Errorf("cleaned messages differ:\n%s\n%s", first, again)
	}
	if want := "ServerFaultCode: session <id> expired at <time>"; first != want {
		t.Errorf("CleanMessage = %q, want %q", first, want)
	}
}
