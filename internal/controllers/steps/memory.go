package steps

import (
	"time"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// memory is what the operator remembers of one object between its decisions, besides its
// annotations, and loses on restart: the attempts of its last patch, whether it was seen not
// selected since (bootimage.Object.Patched and OptedOut, which the decision reads), since when its
// cloud lookups fail, since when its stream target has been unavailable, and the last update an
// admission policy refused. The Tracker keeps one per object; the methods return the next one.
// The zero memory is an object seen for the first time.
type memory struct {
	patched  bootimage.Attempts
	optedOut bool
	// cloudFailingSince is when the object's cloud lookups began to fail; zero while they work.
	cloudFailingSince time.Time
	// unavailable is the stream target the cloud does not have, and since when.
	unavailable      string
	unavailableSince time.Time
	// denied is the last update an admission policy refused for good.
	Denied Denial
}

// Denial is an update an admission policy refused: to target, of the object and inputs at
// version, and the decision's message, in the policy's words. The same update of the same object
// on the same inputs is not sent again.
type Denial struct {
	Target, Version, Message string
}

// into hands what the decision reads of m to obj.
func (m memory) into(obj *bootimage.Object) {
	obj.Patched, obj.OptedOut = m.patched, m.optedOut
}

// Refused returns d as the Skip DeniedByPolicy m remembers when d is the update that was refused
// at version, and d otherwise.
func (m memory) Refused(d bootimage.Decision, version string) bootimage.Decision {
	if d.Action != bootimage.Update || m.Denied.Target != d.Target || m.Denied.Version != version {
		return d
	}
	d.ProviderSpecPatch = nil
	d.Action, d.Reason, d.Message = bootimage.Skip, bootimage.ReasonDeniedByPolicy, m.Denied.Message
	return d
}

// decided returns m after decision d: an object not selected starts counting afresh.
func (m memory) decided(d bootimage.Decision) memory {
	if d.Reason == bootimage.ReasonNotSelected {
		m.patched, m.optedOut = bootimage.Attempts{}, true
	}
	return m
}

// patch returns m after a patch that recorded next.
func (m memory) patch(next bootimage.Attempts) memory {
	m.patched, m.optedOut = next, false
	return m
}

// cloudFailed returns m after a cloud lookup failed at now, and how long the lookups have failed.
func (m memory) cloudFailed(now time.Time) (memory, time.Duration) {
	if m.cloudFailingSince.IsZero() {
		m.cloudFailingSince = now
	}
	return m, now.Sub(m.cloudFailingSince)
}

// cloudWorks returns m after the cloud lookups worked.
func (m memory) cloudWorks() memory {
	m.cloudFailingSince = time.Time{}
	return m
}

// targetUnavailable returns m after decision d, taken at now, and for how long d's target has
// been unavailable in the cloud: 0 unless d is Skip TargetImageUnavailable; a new target starts a
// new clock.
func (m memory) targetUnavailable(d bootimage.Decision, now time.Time) (memory, time.Duration) {
	if d.Action != bootimage.Skip || d.Reason != bootimage.ReasonTargetImageUnavailable {
		m.unavailable, m.unavailableSince = "", time.Time{}
		return m, 0
	}
	if m.unavailable != d.Target {
		m.unavailable, m.unavailableSince = d.Target, now
	}
	return m, now.Sub(m.unavailableSince)
}
