// Command check-requirements fails when a go.mod requires a module at a version newer than the
// MCO's (the list in hack/mco-requirements.txt), or a pseudo-version of a module the MCO takes at
// a release, unless hack/newer-than-mco.txt names it with a reason. The MCO imports this module,
// and Go's version selection would upgrade the MCO to whatever is required here.
//
// Usage: check-requirements MCO-LIST ALLOW-LIST GO.MOD...
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: check-requirements MCO-LIST ALLOW-LIST GO.MOD...")
		os.Exit(2)
	}
	mco, err := readList(os.Args[1])
	if err != nil {
		fail(err)
	}
	allowed, err := readList(os.Args[2])
	if err != nil {
		fail(err)
	}
	var problems []string
	for _, path := range os.Args[3:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		f, err := modfile.ParseLax(path, data, nil)
		if err != nil {
			fail(err)
		}
		var reqs []module.Version
		for _, r := range f.Require {
			reqs = append(reqs, r.Mod)
		}
		for _, p := range Check(reqs, mco, allowed) {
			problems = append(problems, path+": "+p)
		}
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("%d requirements above the MCO's (hack/mco-requirements.txt); lower them or name them with a reason in hack/newer-than-mco.txt\n", len(problems))
		os.Exit(1)
	}
}

// Check returns a line for each requirement newer than the MCO's version of that module, and for
// each pseudo-version of a module the MCO requires at a release. Modules the MCO does not require
// cannot upgrade it and pass; allowed names the exceptions.
func Check(reqs []module.Version, mco, allowed map[string]string) []string {
	var out []string
	for _, r := range reqs {
		if _, ok := allowed[r.Path]; ok {
			continue
		}
		theirs, ok := mco[r.Path]
		if !ok {
			continue
		}
		switch {
		case semver.Compare(r.Version, theirs) > 0:
			out = append(out, fmt.Sprintf("%s %s is newer than the MCO's %s", r.Path, r.Version, theirs))
		case module.IsPseudoVersion(r.Version) && !module.IsPseudoVersion(theirs):
			out = append(out, fmt.Sprintf("%s %s is an unreleased pseudo-version; the MCO takes release %s", r.Path, r.Version, theirs))
		}
	}
	return out
}

// readList reads "module rest..." lines into module -> first word of rest; # starts a comment.
func readList(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		out[fields[0]] = ""
		if len(fields) > 1 {
			out[fields[0]] = fields[1]
		}
	}
	return out, s.Err()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "check-requirements:", err)
	os.Exit(2)
}
