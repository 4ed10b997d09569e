package refresh

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	ign "github.com/coreos/ignition/v2/config/v3_6_experimental/types"
	"github.com/vincent-petithory/dataurl"
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
	// Old and New are the file contents, for policies that look inside (registries.conf).
	Old, New []byte `json:"-"`
}

// Diff lists the changes from old to new in a deterministic order: the MachineConfig fields,
// then files, directories, links, units, users and groups, storage, each by name.
func Diff(old, new Config) ([]Change, error) {
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
	if old.KernelType != new.KernelType {
		add(KindKernelType, new.KernelType, "changed")
	}
	if !sameSet(old.Extensions, new.Extensions) {
		add(KindExtensions, strings.Join(new.Extensions, ","), "changed")
	}
	files, err := diffFiles(old.Ignition.Storage.Files, new.Ignition.Storage.Files)
	if err != nil {
		return nil, err
	}
	out = append(out, files...)
	out = append(out, diffByName(KindDirectory, old.Ignition.Storage.Directories, new.Ignition.Storage.Directories, func(d ign.Directory) string { return d.Path }, anyChange[ign.Directory])...)
	out = append(out, diffByName(KindLink, old.Ignition.Storage.Links, new.Ignition.Storage.Links, func(l ign.Link) string { return l.Path }, anyChange[ign.Link])...)
	out = append(out, diffUnits(old.Ignition.Systemd.Units, new.Ignition.Systemd.Units)...)
	out = append(out, diffPasswd(old.Ignition.Passwd, new.Ignition.Passwd)...)
	oldKA, newKA := old.Ignition.KernelArguments, new.Ignition.KernelArguments
	if !jsonEqual(oldKA, newKA) {
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
	return out, nil
}

// file is a file as it lands on disk: decoded contents plus what else Ignition sets.
type file struct {
	contents  []byte
	remote    string // a source that is not a data URL: compared as written
	mode      string
	owner     string
	overwrite string
	hasAppend bool
}

func decodeFile(f ign.File) (file, error) {
	out := file{mode: ptrString(f.Mode, "%o"), owner: owner(f.User, f.Group), overwrite: ptrString(f.Overwrite, "%v"), hasAppend: len(f.Append) > 0}
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
	data := du.Data
	if c := f.Contents.Compression; c != nil && *c == "gzip" {
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return file{}, fmt.Errorf("file %s: contents are not gzip: %v", f.Path, err)
		}
		if data, err = io.ReadAll(r); err != nil {
			return file{}, fmt.Errorf("file %s: contents are not gzip: %v", f.Path, err)
		}
	}
	out.contents = data
	return out, nil
}

func diffFiles(old, new []ign.File) ([]Change, error) {
	decode := func(files []ign.File) (map[string]file, error) {
		m := make(map[string]file, len(files))
		for _, f := range files {
			d, err := decodeFile(f)
			if err != nil {
				return nil, err
			}
			m[f.Path] = d
		}
		return m, nil
	}
	o, err := decode(old)
	if err != nil {
		return nil, err
	}
	n, err := decode(new)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, path := range unionKeys(o, n) {
		of, inOld := o[path]
		nf, inNew := n[path]
		c := Change{Kind: KindFile, Name: path, Old: of.contents, New: nf.contents}
		switch {
		case !inOld:
			c.What = "added"
		case !inNew:
			c.What = "removed"
		default:
			var what []string
			if !bytes.Equal(of.contents, nf.contents) || of.remote != nf.remote {
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
			if len(what) == 0 && !(nf.hasAppend && !of.hasAppend) {
				continue
			}
			c.What = strings.Join(what, ",")
		}
		if nf.hasAppend {
			c.What = "append"
		}
		out = append(out, c)
	}
	return out, nil
}

func diffUnits(old, new []ign.Unit) []Change {
	return diffByName(KindUnit, old, new, func(u ign.Unit) string { return u.Name }, func(ou, nu ign.Unit) string {
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
}

func dropins(u ign.Unit) map[string]string {
	m := map[string]string{}
	for _, d := range u.Dropins {
		m[d.Name] = ptrString(d.Contents, "%s")
	}
	return m
}

// CoreUser is the only user whose changes can be applied in place.
const CoreUser = "core"

func diffPasswd(old, new ign.Passwd) []Change {
	var out []Change
	o, n := map[string]ign.PasswdUser{}, map[string]ign.PasswdUser{}
	for _, u := range old.Users {
		o[u.Name] = u
	}
	for _, u := range new.Users {
		n[u.Name] = u
	}
	for _, name := range unionKeys(o, n) {
		ou, nu := o[name], n[name]
		if name != CoreUser {
			if !jsonEqual(ou, nu) {
				out = append(out, Change{Kind: KindPasswd, Name: name, What: "user"})
			}
			continue
		}
		if !sameSet(keys(ou.SSHAuthorizedKeys), keys(nu.SSHAuthorizedKeys)) {
			out = append(out, Change{Kind: KindSSHKey, Name: CoreUser, What: "sshAuthorizedKeys"})
		}
		if ptrString(ou.PasswordHash, "%s") != ptrString(nu.PasswordHash, "%s") {
			out = append(out, Change{Kind: KindPasswd, Name: CoreUser, What: "passwordHash"})
		}
		ou.SSHAuthorizedKeys, nu.SSHAuthorizedKeys, ou.PasswordHash, nu.PasswordHash = nil, nil, nil, nil
		if !jsonEqual(ou, nu) {
			out = append(out, Change{Kind: KindPasswd, Name: CoreUser, What: "user"})
		}
	}
	if !jsonEqual(old.Groups, new.Groups) {
		out = append(out, Change{Kind: KindPasswd, Name: "groups", What: "groups"})
	}
	return out
}

func keys(ks []ign.SSHAuthorizedKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = strings.TrimSpace(string(k))
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

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
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
