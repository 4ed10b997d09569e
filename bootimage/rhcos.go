package bootimage

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
)

var (
	// An RHCOS release inside a description: "RHEL CoreOS 9.6 9.6.20260210-0 x86_64",
	// "rhcos-9.6.20250701-0-x86_64" (ROSA), "OpenShift 4.18 418.94.202511191518-0 x86_64" (pre-4.19).
	rhcosReleaseIn = regexp.MustCompile(`(\d+)\.(\d+)\.(?:\d{8}|\d{12})-\d+`)
)

// RHCOSRelease is an RHCOS release such as 9.6.20260210-0, compared on major.Minor only: the
// release a marketplace image description names, and what skew enforcement records.
type RHCOSRelease struct {
	Full         string
	Major, Minor int
}

// ParseRHCOSRelease finds the RHCOS release in s, a description or a release.
func ParseRHCOSRelease(s string) (RHCOSRelease, bool) {
	m := rhcosReleaseIn.FindStringSubmatch(s)
	if m == nil {
		return RHCOSRelease{}, false
	}
	major, err1 := strconv.Atoi(m[1])
	minor, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return RHCOSRelease{}, false
	}
	return RHCOSRelease{Full: m[0], Major: major, Minor: minor}, true
}

// PreRHELAligned is true for the release scheme before OCP 4.19, where the major encodes the OCP
// version (418.94 is OCP 4.18 on RHEL 9.4).
func (r RHCOSRelease) PreRHELAligned() bool { return r.Major > 100 }

// Compare orders r and o on major.Minor.
func (r RHCOSRelease) Compare(o RHCOSRelease) int {
	return cmp.Or(cmp.Compare(r.Major, o.Major), cmp.Compare(r.Minor, o.Minor))
}

// CompareRHCOSVersions orders two RHCOS releases on major.Minor, then on the rest of the string
// (the build date); an unparseable one sorts first, so the oldest known release stays the claim.
func CompareRHCOSVersions(a, b string) int {
	ra, okA := ParseRHCOSRelease(a)
	rb, okB := ParseRHCOSRelease(b)
	if !okA || !okB {
		return cmp.Compare(boolRank(okA), boolRank(okB))
	}
	return cmp.Or(ra.Compare(rb), cmp.Compare(a, b))
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Token is the release's major.Minor.
func (r RHCOSRelease) Token() string { return fmt.Sprintf("%d.%d", r.Major, r.Minor) }
