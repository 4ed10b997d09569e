package refresh

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/vincent-petithory/dataurl"

	"github.com/bootimage-operator/bootimage-operator/refresh/internal/gzipped"
)

// Kind is what a change is about.
type Kind string

// Kinds of change.
const (
	KindFile            Kind = "file"
	KindUnit            Kind = "unit"
	KindSSHKey          Kind = "sshkey"
	KindPasswd          Kind = "passwd"
	KindOSImage         Kind = "osImage"
	KindKernelArguments Kind = "kernelArguments"
	KindFIPS            Kind = "fips"
	KindKernelType      Kind = "kernelType"
	KindExtensions      Kind = "extensions"
	KindDirectory       Kind = "directory"
	KindLink            Kind = "link"
	KindStorage         Kind = "storage"
)

// Change is one difference between two configs.
type Change struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	// What says how it changed: added, removed, contents, mode, owner, overwrite, append, ...
	What string `json:"what"`
	// Old and New are the decoded file contents, for policies that look inside (registries.conf).
	Old, New []byte `json:"-"`
	// remote is true when either version of the file has a source other than a data URL, whose
	// contents cannot be looked inside.
	remote bool
	// specialMode is the new file's mode when it has bits above 0777 (setuid, setgid, sticky).
	specialMode *int
}

// diffConfigs is Diff.
func diffConfigs(old, new nodeConfig) ([]Change, error) {
	var out []Change
	add := func(k Kind, name, what string) { out = append(out, Change{Kind: k, Name: name, What: what}) }
	if old.OSImageURL != new.OSImageURL {
		add(KindOSImage, new.OSImageURL, "changed")
	}
	if !slices.Equal(old.KernelArguments, new.KernelArguments) {
		add(KindKernelArguments, strings.Join(new.KernelArguments, " "), "changed")
	}
	if old.FIPS != new.FIPS {
		add(KindFIPS, fmt.Sprint(new.FIPS), "changed")
	}
	if canonicalKernelType(old.KernelType) != canonicalKernelType(new.KernelType) {
		add(KindKernelType, canonicalKernelType(new.KernelType), "changed")
	}
	// Order counts, as in the MCO.
	if !slices.Equal(old.Extensions, new.Extensions) {
		add(KindExtensions, strings.Join(new.Extensions, ","), "changed")
	}
	files, forbidden, err := diffFiles(old.Ignition.Storage.Files, new.Ignition.Storage.Files)
	if err != nil {
		return nil, err
	}
	out = append(out, files...)
	out = append(out, diffByName(KindDirectory, old.Ignition.Storage.Directories, new.Ignition.Storage.Directories, func(d ign.Directory) string { return d.Path }, anyChange[ign.Directory])...)
	out = append(out, diffLinks(old.Ignition.Storage.Links, new.Ignition.Storage.Links)...)
	out = append(out, diffUnits(old.Ignition.Systemd.Units, new.Ignition.Systemd.Units)...)
	out = append(out, diffPasswd(old.Ignition.Passwd, new.Ignition.Passwd)...)
	if !jsonEqual(old.Ignition.KernelArguments, new.Ignition.KernelArguments) {
		add(KindKernelArguments, "ignition.kernelArguments", "changed")
	}
	for _, s := range []struct {
		name     string
		old, new any
	}{
		{"disks", old.Ignition.Storage.Disks, new.Ignition.Storage.Disks},
		{"filesystems", old.Ignition.Storage.Filesystems, new.Ignition.Storage.Filesystems},
		{"raid", old.Ignition.Storage.Raid, new.Ignition.Storage.Raid},
		{"luks", old.Ignition.Storage.Luks, new.Ignition.Storage.Luks},
	} {
		if !jsonEqual(s.old, s.new) {
			add(KindStorage, s.name, "changed")
		}
	}
	if len(out) > 0 {
		out = append(out, forbidden...)
	}
	return out, nil
}

// canonicalKernelType maps every kernel type other than realtime and 64k-pages, "" included, to
// "default", as the MCO does.
func canonicalKernelType(t string) string {
	if t == "realtime" || t == "64k-pages" {
		return t
	}
	return "default"
}

// file is a file as it lands on disk: decoded contents plus what else Ignition sets.
type file struct {
	contents     []byte
	remote       string // a source that is not a data URL: compared as written
	verification string
	mode         string
	owner        string
	overwrite    string
	appends      []ign.Resource
}

func decodeFile(f ign.File) (file, error) {
	out := file{
		verification: ptrString(f.Contents.Verification.Hash, "%s"), mode: ptrString(f.Mode, "%o"),
		owner: owner(f.User, f.Group), overwrite: ptrString(f.Overwrite, "%v"), appends: f.Append,
	}
	src := f.Contents.Source
	if src == nil {
		return out, nil
	}
	if !strings.HasPrefix(*src, "data:") {
		out.remote = *src
		return out, nil
	}
	du, err := dataurl.DecodeString(*src)
	if err != nil {
		return file{}, fmt.Errorf("file %s: contents are not a valid data URL: %v", f.Path, err)
	}
	out.contents = du.Data
	switch c := ptrString(f.Contents.Compression, "%s"); c {
	case "":
	case "gzip":
		if out.contents, err = gzipped.Decompress(du.Data); err != nil {
			return file{}, fmt.Errorf("file %s: contents: %v", f.Path, err)
		}
	default:
		return file{}, fmt.Errorf("file %s: unsupported compression %q", f.Path, c)
	}
	return out, nil
}

// diffFiles returns the changed files, and apart the unchanged new files that the MCO refuses in
// any config it applies (with append, or the force file). Only files written differently are
// decoded: the same entry lands alike, and this keeps a large config cheap to compare.
func diffFiles(old, new []ign.File) (changes, forbidden []Change, err error) {
	byPath := func(files []ign.File) map[string]*ign.File {
		m := make(map[string]*ign.File, len(files))
		for i := range files {
			m[files[i].Path] = &files[i]
		}
		return m
	}
	o, n := byPath(old), byPath(new)
	for _, path := range unionKeys(o, n) {
		rawOld, inOld := o[path]
		rawNew, inNew := n[path]
		var special *int
		if inNew && rawNew.Mode != nil && (*rawNew.Mode < 0 || *rawNew.Mode > 0o777) {
			special = rawNew.Mode
		}
		if refused := inNew && (len(rawNew.Append) > 0 || path == forceFile || special != nil); refused {
			unchanged := Change{Kind: KindFile, Name: path, What: "unchanged", specialMode: special}
			if len(rawNew.Append) > 0 {
				unchanged.What = "append, unchanged"
			}
			forbidden = append(forbidden, unchanged)
		}
		if inOld && inNew && reflect.DeepEqual(rawOld, rawNew) {
			continue
		}
		var of, nf file
		if inOld {
			if of, err = decodeFile(*rawOld); err != nil {
				return nil, nil, err
			}
		}
		if inNew {
			if nf, err = decodeFile(*rawNew); err != nil {
				return nil, nil, err
			}
		}
		c := Change{Kind: KindFile, Name: path, Old: of.contents, New: nf.contents, remote: of.remote != "" || nf.remote != "", specialMode: special}
		switch {
		case !inOld:
			c.What = "added"
		case !inNew:
			c.What = "removed"
		default:
			c.What = fileChange(of, nf)
		}
		switch {
		case c.What == "":
			continue // written differently, landing alike (another encoding, gzip or not)
		case inNew && len(nf.appends) > 0:
			c.What = "append"
		}
		if n := len(forbidden); n > 0 && forbidden[n-1].Name == path {
			forbidden = forbidden[:n-1] // listed as a change
		}
		changes = append(changes, c)
	}
	return changes, forbidden, nil
}

// fileChange says how a file present in both configs changed, "" when it did not.
func fileChange(of, nf file) string {
	var what []string
	if !bytes.Equal(of.contents, nf.contents) || of.remote != nf.remote || of.verification != nf.verification {
		what = append(what, "contents")
	}
	if of.mode != nf.mode {
		what = append(what, "mode")
	}
	if of.owner != nf.owner {
		what = append(what, "owner")
	}
	if of.overwrite != nf.overwrite {
		what = append(what, "overwrite")
	}
	if (len(of.appends) > 0 || len(nf.appends) > 0) && !reflect.DeepEqual(of.appends, nf.appends) {
		what = append(what, "append")
	}
	return strings.Join(what, ",")
}

// diffLinks reports link changes. The MCO lets links go only when none remain, so a removal is
// "removed" only then.
func diffLinks(old, new []ign.Link) []Change {
	changes := diffByName(KindLink, old, new, func(l ign.Link) string { return l.Path }, anyChange[ign.Link])
	if len(new) > 0 {
		for i := range changes {
			if changes[i].What == "removed" {
				changes[i].What = "removed, other links remain"
			}
		}
	}
	return changes
}

// diffUnits lists added units, then changed, then removed, each by name: the MCO runs the unit
// policies' actions in that order (GetChangedConfigUnitsByType), each group in map order.
func diffUnits(old, new []ign.Unit) []Change {
	changes := diffByName(KindUnit, old, new, func(u ign.Unit) string { return u.Name }, func(ou, nu ign.Unit) string {
		var what []string
		if ptrString(ou.Contents, "%s") != ptrString(nu.Contents, "%s") {
			what = append(what, "contents")
		}
		if ptrString(ou.Enabled, "%v") != ptrString(nu.Enabled, "%v") {
			what = append(what, "enabled")
		}
		if ptrString(ou.Mask, "%v") != ptrString(nu.Mask, "%v") {
			what = append(what, "mask")
		}
		if !jsonEqual(dropins(ou), dropins(nu)) {
			what = append(what, "dropins")
		}
		return strings.Join(what, ",")
	})
	group := func(c Change) int {
		switch c.What {
		case "added":
			return 0
		case "removed":
			return 2
		}
		return 1
	}
	slices.SortStableFunc(changes, func(a, b Change) int { return group(a) - group(b) })
	return changes
}

// dropins are compared by name: each is its own file under <unit>.d, which systemd reads in name
// order, so their order in the config writes nothing different. Absent contents are "", as the
// daemon writes them (writeDropins).
func dropins(u ign.Unit) map[string]string {
	m := map[string]string{}
	for _, d := range u.Dropins {
		m[d.Name] = ptrString(d.Contents, "%s")
	}
	return m
}

// coreUser is the only user whose changes can be applied in place.
const coreUser = "core"

// diffPasswd follows the MCO's rules for the passwd section. When users change, every user in the
// new config must be core, and core's entry, if any, may set only ssh keys and a password hash and
// must keep one of them. A change of core's keys or password, core's entry added or removed, or
// another user removed (the MCO clears its password) is for the sshkey policy. Groups cannot change.
func diffPasswd(old, new ign.Passwd) []Change {
	var out []Change
	if !reflect.DeepEqual(old.Groups, new.Groups) {
		out = append(out, Change{Kind: KindPasswd, Name: "groups", What: "groups"})
	}
	if reflect.DeepEqual(old.Users, new.Users) {
		return out
	}
	inNew := map[string]bool{}
	var newCore, oldCore *ign.PasswdUser
	for i, u := range new.Users {
		inNew[u.Name] = true
		if u.Name != coreUser {
			out = append(out, Change{Kind: KindPasswd, Name: u.Name, What: "notCore"})
			continue
		}
		newCore = &new.Users[i]
	}
	for i, u := range old.Users {
		switch {
		case u.Name == coreUser:
			oldCore = &old.Users[i]
		case !inNew[u.Name]:
			out = append(out, Change{Kind: KindPasswd, Name: u.Name, What: "removed"})
		}
	}
	if newCore == nil {
		if oldCore != nil {
			out = append(out, Change{Kind: KindSSHKey, Name: coreUser, What: "entry removed"})
		}
		return out
	}
	if newCore.PasswordHash == nil && len(newCore.SSHAuthorizedKeys) == 0 {
		out = append(out, Change{Kind: KindPasswd, Name: coreUser, What: "coreNoLogin"})
	}
	rest := *newCore
	rest.Name, rest.SSHAuthorizedKeys, rest.PasswordHash = "", nil, nil
	if !reflect.DeepEqual(rest, ign.PasswdUser{}) {
		out = append(out, Change{Kind: KindPasswd, Name: coreUser, What: "coreOtherField"})
	}
	var was ign.PasswdUser
	if oldCore != nil {
		was = *oldCore
	}
	if !slices.Equal(was.SSHAuthorizedKeys, newCore.SSHAuthorizedKeys) {
		out = append(out, Change{Kind: KindSSHKey, Name: coreUser, What: "ssh keys"})
	}
	if !reflect.DeepEqual(was.PasswordHash, newCore.PasswordHash) {
		out = append(out, Change{Kind: KindSSHKey, Name: coreUser, What: "password hash"})
	}
	return out
}

// diffByName reports entries added, removed or changed between old and new, keyed by name;
// changed says how an entry changed, "" when it did not.
func diffByName[T any](kind Kind, old, new []T, name func(T) string, changed func(old, new T) string) []Change {
	o, n := map[string]T{}, map[string]T{}
	for _, v := range old {
		o[name(v)] = v
	}
	for _, v := range new {
		n[name(v)] = v
	}
	var out []Change
	for _, k := range unionKeys(o, n) {
		ov, inOld := o[k]
		nv, inNew := n[k]
		switch {
		case !inOld:
			out = append(out, Change{Kind: kind, Name: k, What: "added"})
		case !inNew:
			out = append(out, Change{Kind: kind, Name: k, What: "removed"})
		default:
			if what := changed(ov, nv); what != "" {
				out = append(out, Change{Kind: kind, Name: k, What: what})
			}
		}
	}
	return out
}

func unionKeys[V any](a, b map[string]V) []string {
	out := make([]string, 0, len(a)+len(b))
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func ptrString[T any](p *T, format string) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(format, *p)
}

func owner(u ign.NodeUser, g ign.NodeGroup) string {
	return ptrString(u.ID, "%d") + ":" + ptrString(u.Name, "%s") + "/" + ptrString(g.ID, "%d") + ":" + ptrString(g.Name, "%s")
}

// anyChange says "changed" when old and new differ at all.
func anyChange[T any](old, new T) string {
	if jsonEqual(old, new) {
		return ""
	}
	return "changed"
}
