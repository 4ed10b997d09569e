package bootimage

import "fmt"

// Canary is what the canary objects say of one target: the first canary that has it, and
// whether a machine of a canary has booted it.
type Canary struct {
	Object   string
	Verified bool
	// Failed is the error of a canary machine that failed on the target; "" for none.
	Failed string
}

// Canaries are what the cluster's canary objects (CanaryLabel) say: their targets, and a canary
// not decided yet, whose target is unknown.
type Canaries struct {
	Targets   map[string]Canary
	Undecided string
}

// Note adds what canary object says of target: it has the target (as its next update or its
// newest change), verified or not.
func (c Canaries) Note(target, object string, verified bool, failed string) {
	if target == "" {
		return
	}
	prev, seen := c.Targets[target]
	if !seen {
		prev.Object = object
	}
	prev.Verified = prev.Verified || verified
	if prev.Failed == "" {
		prev.Failed = failed
	}
	c.Targets[target] = prev
}

// NoteCanary adds what the canary name says of its targets: the operator's changes in its history
// (annotations), and its decision d on the current inputs (decided false: none yet, Undecided).
func (c *Canaries) NoteCanary(name string, annotations map[string]string, d Decision, decided bool) {
	if c.Targets == nil {
		c.Targets = map[string]Canary{}
	}
	h, _ := HistoryOf(annotations)
	for _, ch := range h {
		if ch.By == ByOperator {
			c.Note(ch.To, name, ch.Outcome == Verified, canaryFailure(ch))
		}
	}
	switch {
	case !decided:
		c.Undecided = name
	// A MachineDeployment rolling out takes its target once the rollout ends: it still goes first.
	case d.Action == Update || d.Reason == ReasonBootImageHeld || d.Reason == ReasonMachineDeploymentRollingOut:
		c.Note(d.Target, name, false, "")
	}
}

// canaryFailure is the failure c's outcome records, as the objects waiting for its canary say it.
func canaryFailure(c Change) string {
	if c.Outcome != Failed {
		return ""
	}
	return "machine " + c.Machine + ": " + c.Error
}

// IsCanary reports whether obj is a canary.
func (o Object) IsCanary() bool { return o.Labels[CanaryLabel] == "true" }

// awaitCanary returns d as the Skip WaitingForCanary when d updates a non-canary object to a
// target a canary has and no canary machine has booted yet; d otherwise.
func awaitCanary(d Decision, obj Object, canaries Canaries) Decision {
	if d.Action != Update || obj.IsCanary() {
		return d
	}
	c, ok := canaries.Targets[d.Target]
	if !ok && canaries.Undecided != "" {
		d.ProviderSpecPatch, d.UserData, d.Prepare = nil, nil, nil
		return d.With(Skip, ReasonWaitingForCanary, "keeps %s: canary %s has no decision yet, so whether it takes %s first is not known", d.Current, canaries.Undecided, d.Target)
	}
	if !ok || c.Verified {
		return d
	}
	d.ProviderSpecPatch, d.UserData, d.Prepare = nil, nil, nil
	why := "no machine of it has booted it yet"
	if c.Failed != "" {
		why = fmt.Sprintf("its machine failed on it: %s", c.Failed)
	}
	return d.With(Skip, ReasonWaitingForCanary, "keeps %s: canary %s has %s and %s; this object is updated once a canary machine becomes a node", d.Current, c.Object, d.Target, why)
}
