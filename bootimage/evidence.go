package bootimage

import (
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Machine is what verification reads of a machine an object created.
type Machine struct {
	Name    string
	Created time.Time
	// Image is the boot image its spec names, in the form of Decision.Current.
	Image string
	// Node is the Node it became; "" until then.
	Node     string
	Deleting bool
	// Failed is true once the machine controller gave up on it (phase Failed).
	Failed bool
	// Errors are what its machine controller and provider said: the error message and the
	// messages of its failing conditions.
	Errors []string
}

// Verdict is what the machines created since a change say of it.
type Verdict struct {
	// Outcome is Verified or Failed; "" while nothing says either.
	Outcome string
	Machine string
	Error   string
	// Recheck is when a pending verdict can change with no event (a deadline passing); zero for
	// none.
	Recheck time.Time
	// NotEvidence are the machines that failed for a reason that is not the image, with it.
	NotEvidence []string
}

// Verify reads the machines of an object for evidence about its change c: one that became a node
// verifies it; one whose error the platform's imageFailure names (an image the cloud does not
// have or will not launch) fails it, as does one that stayed without a node for deadline while
// a machine on the previous image became one. Any other failure (capacity, quota, a subnet, a
// machine deleted) says nothing about the image.
func Verify(c Change, machines []Machine, imageFailure *regexp.Regexp, deadline time.Duration, now time.Time) Verdict {
	var v Verdict
	previousJoined := slices.ContainsFunc(machines, func(m Machine) bool { return m.Image != c.To && m.Node != "" })
	since := c.At.Truncate(time.Second)
	for _, m := range sortedByCreation(machines) {
		if m.Image != c.To || m.Created.Before(since) {
			continue
		}
		switch {
		case m.Node != "":
			return Verdict{Outcome: Verified, Machine: m.Name}
		case v.Outcome != "":
		case imageError(m, imageFailure) != "":
			v.Outcome, v.Machine, v.Error = Failed, m.Name, imageError(m, imageFailure)
		case m.Deleting:
		case m.Failed || len(m.Errors) > 0:
			v.NotEvidence = append(v.NotEvidence, fmt.Sprintf("%s (%s)", m.Name, firstOr(m.Errors, "failed")))
		case !now.Before(m.Created.Add(deadline)):
			if previousJoined {
				v.Outcome, v.Machine = Failed, m.Name
				v.Error = fmt.Sprintf("did not become a node within %s of its creation, while a machine on %s did", deadline, c.From)
			}
		default:
			if at := m.Created.Add(deadline); v.Recheck.IsZero() || at.Before(v.Recheck) {
				v.Recheck = at
			}
		}
	}
	if v.Outcome != "" {
		v.Recheck = time.Time{}
	}
	return v
}

// imageError returns the first of m's errors that imageFailure names; "" for none.
func imageError(m Machine, imageFailure *regexp.Regexp) string {
	if imageFailure == nil {
		return ""
	}
	for _, e := range m.Errors {
		if imageFailure.MatchString(e) {
			return e
		}
	}
	return ""
}

func firstOr(s []string, fallback string) string {
	if len(s) == 0 {
		return fallback
	}
	return s[0]
}

func sortedByCreation(machines []Machine) []Machine {
	out := slices.Clone(machines)
	slices.SortStableFunc(out, func(a, b Machine) int { return a.Created.Compare(b.Created) })
	return out
}
