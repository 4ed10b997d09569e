package bootimage

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
)

// A boot image is trusted once a machine has booted it. Each write records, on the object, the
// image it replaced (HistoryAnnotation); the machines the object creates from then on are the
// evidence; a machine that fails because of its image puts the object back on the image it
// replaced and holds that target (HoldAnnotation) until the stream moves past it or an admin
// clears the hold.
const (
	// HistoryAnnotation holds the object's boot image changes, newest last (History).
	HistoryAnnotation = "bootimage.openshift.io/history"
	// HoldAnnotation holds a target the object must not be updated to (Hold).
	HoldAnnotation = "bootimage.openshift.io/hold"
	// CanaryLabel, "true" on a selected object, makes it take a new target first: the other
	// objects with the same target wait until a machine of a canary has booted it.
	CanaryLabel = "bootimage.openshift.io/canary"
	// VerificationAnnotation on MachineConfiguration/cluster: "Disabled" turns verification off.
	VerificationAnnotation = "bootimage.openshift.io/verification"
	// VerificationDeadlineAnnotation on MachineConfiguration/cluster: how long a new machine
	// may take to become a node (a Go duration).
	VerificationDeadlineAnnotation = "bootimage.openshift.io/verification-deadline"
)

// States of a change (Decision.Verification).
const (
	Pending  = "Pending"
	Verified = "Verified"
	Failed   = "Failed"
)

// Who wrote a change.
const (
	ByOperator = "operator"
	ByRestore  = "restore"
	// ByHand is a restore made with bootimagectl restore.
	ByHand = "bootimagectl"
)

// HistoryLength is how many changes an object keeps: enough to see the last updates and restores
// at a glance, small enough to stay far below the annotations' size limit.
const HistoryLength = 5

// defaultVerificationDeadline is how long a new machine may take to become a node before it is
// evidence against its image: twice the Machine API's default MachineHealthCheck node startup
// timeout, as a vSphere clone or a large instance takes longer than a health check allows.
const defaultVerificationDeadline = 20 * time.Minute

// Change is one boot image write: from the image it replaced to the one it wrote, when and by
// whom, with the patch that undoes it and, once known, what the machines said of it.
type Change struct {
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	// Revert puts the object's spec back as it was before the change: for a Machine API object,
	// paths as in Decision.ProviderSpecPatch; for a Cluster API one, paths from the object's root
	// (its infrastructureRef name, tested to be the copy the change wrote). Empty when the change
	// cannot be undone.
	Revert []PatchOp `json:"revert,omitempty"`
	// Template is, for a Cluster API object, the infrastructure machine templates the change
	// moved it between: its machines are told apart by the template they were cloned from, and
	// the collector keeps Template.From while the change is pending. Absent for the Machine API.
	Template *TemplateChange `json:"template,omitempty"`
	// Outcome is Verified or Failed once a machine said so; "" while pending.
	Outcome string `json:"outcome,omitempty"`
	// Machine and Error are the machine that verified or failed the change, and its error.
	Machine string `json:"machine,omitempty"`
	Error   string `json:"error,omitempty"`
}

// TemplateChange is a Cluster API object's move from one infrastructure machine template to a copy.
type TemplateChange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// State is c's Decision.Verification.
func (c Change) State() string { return cmpOr(c.Outcome, Pending) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// History is an object's boot image changes, oldest first.
type History []Change

// HistoryOf reads annotations' history; a malformed one is an error, never an empty history that
// would make a restore impossible without saying so.
func HistoryOf(annotations map[string]string) (History, error) {
	raw, ok := annotations[HistoryAnnotation]
	if !ok {
		return nil, nil
	}
	var h History
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", HistoryAnnotation, err)
	}
	return h, nil
}

// Newest returns the newest change; ok is false for an empty history.
func (h History) Newest() (Change, bool) {
	if len(h) == 0 {
		return Change{}, false
	}
	return h[len(h)-1], true
}

// With returns h with c appended, the oldest dropped beyond HistoryLength.
func (h History) With(c Change) History {
	out := append(slices.Clone(h), c)
	return out[max(0, len(out)-HistoryLength):]
}

// WithNewest returns h with its newest change replaced by c.
func (h History) WithNewest(c Change) History {
	out := slices.Clone(h)
	out[len(out)-1] = c
	return out
}

// PatchOp returns the JSON Patch operation that stores h on an object with annotations.
func (h History) PatchOp(annotations map[string]string) PatchOp {
	raw, _ := json.Marshal(h)
	return AnnotationPatchOp(annotations, HistoryAnnotation, string(raw))
}

// Hold is a target an object must not be updated to, because a machine failed on it (or an
// admin restored the object by hand).
type Hold struct {
	Target   string    `json:"target"`
	Restored string    `json:"restored"`
	Machine  string    `json:"machine,omitempty"`
	Error    string    `json:"error,omitempty"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// HoldOf reads annotations' hold; ok is false without one. A malformed hold is an error.
func HoldOf(annotations map[string]string) (Hold, bool, error) {
	raw, ok := annotations[HoldAnnotation]
	if !ok {
		return Hold{}, false, nil
	}
	var h Hold
	if err := json.Unmarshal([]byte(raw), &h); err != nil || h.Target == "" {
		return Hold{}, false, fmt.Errorf("annotation %s: %s", HoldAnnotation, cmpOr(errString(err), "no target"))
	}
	return h, true, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// PatchOp returns the JSON Patch operation that places h on an object with annotations.
func (h Hold) PatchOp(annotations map[string]string) PatchOp {
	raw, _ := json.Marshal(h)
	return AnnotationPatchOp(annotations, HoldAnnotation, string(raw))
}

// RestorePatch is the JSON Patch, at resourceVersion, that undoes h's newest change: its Revert
// operations (under prefix), the restore recorded after it in the history, by hold.By at
// hold.At, and the hold of the target it undoes (hold's Target and Restored are that change's).
func RestorePatch(prefix, resourceVersion string, annotations map[string]string, h History, hold Hold) ([]byte, error) {
	c, _ := h.Newest()
	hold.Target, hold.Restored = c.To, c.From
	next := h.With(Change{From: c.To, To: c.From, At: hold.At, By: hold.By})
	return Decision{ProviderSpecPatch: c.Revert}.JSONPatch(prefix, resourceVersion, next.PatchOp(annotations), hold.PatchOp(annotations))
}

// ClearHoldOp returns the operation that removes the hold annotation.
func ClearHoldOp() PatchOp {
	return PatchOp{Op: "remove", Path: "/metadata/annotations/" + escapePointer(HoldAnnotation)}
}

func escapePointer(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// ClearCommand is the one command that clears a hold. The kind is qualified by its group: where
// the Cluster API CRDs are installed a bare machineset may resolve to theirs.
func ClearCommand(d Decision) string {
	group := d.APIGroup
	if group == "" {
		group = machinev1beta1.GroupName
	}
	return fmt.Sprintf("oc annotate %s.%s/%s -n %s %s-", strings.ToLower(d.Kind), group, d.Name, d.Namespace, HoldAnnotation)
}

// held returns d as the Skip BootImageHeld when d updates to the target obj holds, and d
// otherwise; a hold of another target no longer applies (the stream moved past it) and is
// cleared by the update's patch (HoldCleared).
func held(d Decision, obj Object) Decision {
	hold, ok, err := HoldOf(obj.Annotations)
	if err != nil {
		d.ProviderSpecPatch, d.UserData, d.Prepare = nil, nil, nil
		return d.With(Error, ReasonInvalidHold, "%v; fix or remove it: %s", err, ClearCommand(d))
	}
	if !ok || d.Action != Update || hold.Target != d.Target {
		return d
	}
	d.ProviderSpecPatch, d.UserData, d.Prepare = nil, nil, nil
	why := "restored by hand"
	if hold.Machine != "" {
		why = fmt.Sprintf("machine %s failed on it: %s", hold.Machine, hold.Error)
	}
	return d.With(Skip, ReasonBootImageHeld, "held on %s, not updated to %s (%s); it stays until the stream moves past %s or the hold is cleared: %s", d.Current, d.Target, why, d.Target, ClearCommand(d))
}

// HoldCleared reports whether an update of obj to d.Target must remove a stale hold.
func HoldCleared(d Decision, obj Object) bool {
	hold, ok, err := HoldOf(obj.Annotations)
	return err == nil && ok && hold.Target != d.Target
}

// Verification is how boot images are verified on a cluster.
type Verification struct {
	Enabled  bool
	Deadline time.Duration
}

// VerificationOf reads MachineConfiguration/cluster's annotations; a value it does not know is
// an error naming the annotation, and verification stays on at its defaults.
func VerificationOf(annotations map[string]string) (Verification, error) {
	v := Verification{Enabled: true, Deadline: defaultVerificationDeadline}
	switch mode := annotations[VerificationAnnotation]; mode {
	case "", "Enabled":
	case "Disabled":
		v.Enabled = false
	default:
		return v, fmt.Errorf("annotation %s: %q is neither Enabled nor Disabled", VerificationAnnotation, mode)
	}
	raw, ok := annotations[VerificationDeadlineAnnotation]
	if !ok {
		return v, nil
	}
	deadline, err := time.ParseDuration(raw)
	if err != nil || deadline < 5*time.Minute || deadline > 24*time.Hour {
		return v, fmt.Errorf("annotation %s: %q is not a duration from 5m to 24h", VerificationDeadlineAnnotation, raw)
	}
	v.Deadline = deadline
	return v, nil
}

// RevertOps returns the operations that undo patch on spec (paths relative to it): each path set
// back to the value it holds in spec, or removed where spec has none. ok is false when spec
// cannot be read, so the change is recorded as one that cannot be undone.
func RevertOps(spec []byte, patch []PatchOp) (ops []PatchOp, ok bool) {
	var doc any
	if json.Unmarshal(spec, &doc) != nil {
		return nil, false
	}
	for _, op := range patch {
		if old, found := pointerValue(doc, op.Path); found {
			ops = append(ops, Set(op.Path, old))
		} else {
			ops = append(ops, PatchOp{Op: "remove", Path: op.Path})
		}
	}
	return ops, true
}

// pointerValue returns the value at the JSON Pointer path in doc.
func pointerValue(doc any, path string) (any, bool) {
	if path == "" {
		return doc, true
	}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, token := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		token = unescape.Replace(token)
		switch node := doc.(type) {
		case map[string]any:
			v, ok := node[token]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(token)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			doc = node[i]
		default:
			return nil, false
		}
	}
	return doc, true
}
