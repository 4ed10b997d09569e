package steps

import (
	"testing"
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

func TestMemoryForgetsTheCountOnceNotSelectedUntilPatchedAgain(t *testing.T) {
	const target, selection = "ami-new", "all"
	o := bootimage.Object{Annotations: map[string]string{bootimage.AttemptsAnnotation: bootimage.Attempts{Target: target, Count: 3, Selection: selection}.String()}}
	m := memory{}.patch(bootimage.Attempts{Target: target, Count: 3, Selection: selection})
	m = m.decided(bootimage.Decision{Action: bootimage.Skip, Reason: bootimage.ReasonNotSelected})
	m.into(&o)
	if got := o.Attempts(target, selection); got != 0 {
		t.Fatalf("opted out and back in: %d attempts, want 0 (updates resume)", got)
	}
	m = m.patch(bootimage.Attempts{Target: target, Count: 1, Selection: selection})
	m.into(&o)
	if got := o.Attempts(target, selection); got != 3 {
		t.Fatalf("patched again: %d attempts, want the annotation's 3", got)
	}
}

func TestMemoryTimesCloudFailuresFromTheFirstUntilALookupWorks(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m, failing := memory{}.cloudFailed(start)
	if failing != 0 {
		t.Fatalf("first failure: failing %v, want 0", failing)
	}
	m, failing = m.cloudFailed(start.Add(time.Minute))
	if failing != time.Minute {
		t.Fatalf("second failure: failing %v, want 1m", failing)
	}
	m, failing = m.cloudWorks().cloudFailed(start.Add(2 * time.Minute))
	if failing != 0 || !m.cloudFailingSince.Equal(start.Add(2*time.Minute)) {
		t.Fatalf("after a working lookup: failing %v since %v, want 0 since the new failure", failing, m.cloudFailingSince)
	}
}

func TestMemoryTimesAnUnavailableTargetFromWhenItWasFirstTheTarget(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	unavailable := func(target string) bootimage.Decision {
		return bootimage.Decision{Action: bootimage.Skip, Reason: bootimage.ReasonTargetImageUnavailable, Target: target}
	}
	steps := []struct {
		d    bootimage.Decision
		at   time.Duration
		want time.Duration
	}{
		{unavailable("a"), 0, 0},
		{unavailable("a"), time.Minute, time.Minute},
		{unavailable("b"), 2 * time.Minute, 0}, // a new target starts a new clock
		{bootimage.Decision{Action: bootimage.NoChange}, 3 * time.Minute, 0},
	}
	var m memory
	for i, s := range steps {
		var lasted time.Duration
		m, lasted = m.targetUnavailable(s.d, start.Add(s.at))
		if lasted != s.want {
			t.Fatalf("step %d: lasted %v, want %v", i, lasted, s.want)
		}
	}
	if m.unavailable != "" {
		t.Fatalf("target still remembered as unavailable: %q", m.unavailable)
	}
}

func TestMemoryRefusesTheSameUpdateOnTheSameVersionOnly(t *testing.T) {
	update := bootimage.Decision{Action: bootimage.Update, Target: "ami-new", ProviderSpecPatch: []bootimage.PatchOp{{Op: "replace"}}}
	m := memory{Denied: Denial{Target: "ami-new", Version: "7/v1", Message: "denied by policy"}}
	if d := m.Refused(update, "7/v1"); d.Action != bootimage.Skip || d.Reason != bootimage.ReasonDeniedByPolicy || d.ProviderSpecPatch != nil || d.Message != "denied by policy" {
		t.Fatalf("same update, same version: %+v, want Skip DeniedByPolicy without a patch", d)
	}
	if d := m.Refused(update, "8/v1"); d.Action != bootimage.Update {
		t.Fatalf("object changed since: %+v, want the update sent again", d)
	}
}
