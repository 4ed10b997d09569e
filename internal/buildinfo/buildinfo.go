// Package buildinfo says which build of this module is running, for `--version`, the `version`
// command and the operator's first log line.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Info is what the Go toolchain stamped into the binary.
type Info struct {
	// Version is the module version (a tag or a pseudo-version), "(devel)" for a local build.
	Version string `json:"version"`
	// Revision is the VCS commit, with "-dirty" when built from a modified tree; "" when unknown.
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if info.Revision != "" && dirty {
		info.Revision += "-dirty"
	}
	if info.Version == "" {
		info.Version = "unknown"
	}
	return info
}

// String is the one-line form: "v1.2.3 (commit abc123, go1.26.8)".
func (i Info) String() string {
	var extra []string
	if i.Revision != "" {
		extra = append(extra, "commit "+i.Revision)
	}
	if i.GoVersion != "" {
		extra = append(extra, i.GoVersion)
	}
	if len(extra) == 0 {
		return i.Version
	}
	return i.Version + " (" + strings.Join(extra, ", ") + ")"
}
