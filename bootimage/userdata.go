package bootimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coreos/ign-converter/translate/v23tov30"
	"github.com/coreos/ign-converter/util"
	ign2errors "github.com/coreos/ignition/config/shared/errors"
	ign22 "github.com/coreos/ignition/config/v2_2"
	ign22types "github.com/coreos/ignition/config/v2_2/types"
	ign23 "github.com/coreos/ignition/config/v2_3"
	ignconfig "github.com/coreos/ignition/v2/config"
	ign30types "github.com/coreos/ignition/v2/config/v3_0/types"
	v31translate "github.com/coreos/ignition/v2/config/v3_1/translate"
	ign32 "github.com/coreos/ignition/v2/config/v3_2"
	v32translate "github.com/coreos/ignition/v2/config/v3_2/translate"
	ign32types "github.com/coreos/ignition/v2/config/v3_2/types"
)

// UserDataStubVersion is the Ignition version a spec 2 stub is upgraded to. The MCO writes its
// newest (3.5.0); 3.2.0 holds everything a spec 2 config can say and is read by every boot image
// that reads spec 3.
const UserDataStubVersion = "3.2.0"

// UpgradeUserData checks a user-data stub. A spec 3 stub is returned as nil (nothing to do); a
// spec 2 stub is converted to spec 3.2.0, since new boot images cannot read spec 2, and returned
// with the version it had. Anything else is an error naming the Secret and the problem.
func UpgradeUserData(u *UserData) ([]byte, string, error) {
	where := fmt.Sprintf("user-data Secret openshift-machine-api/%s", u.SecretName)
	if !u.Found {
		return nil, "", fmt.Errorf("%s not found", where)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(u.Data, &probe); err != nil {
		return nil, "", fmt.Errorf("%s: userData is not a JSON object: %v", where, err)
	}
	var head struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(u.Data, &head); err != nil || head.Ignition.Version == "" {
		return nil, "", fmt.Errorf("%s: userData has no ignition.version", where)
	}
	switch v := head.Ignition.Version; {
	case strings.HasPrefix(v, "3."):
		if _, rpt, err := ignconfig.Parse(u.Data); err != nil {
			return nil, "", fmt.Errorf("%s: invalid Ignition %s config: %v %s", where, v, err, rpt.String())
		}
		return nil, "", nil
	case strings.HasPrefix(v, "2."):
		out, err := convertV2Stub(u.Data)
		if err != nil {
			return nil, "", fmt.Errorf("%s: Ignition %s stub cannot be converted to spec 3: %v", where, v, err)
		}
		return out, v, nil
	default:
		return nil, "", fmt.Errorf("%s: unsupported Ignition version %q", where, v)
	}
}

// convertV2Stub converts a spec 2 config to spec 3.2.0 the way the MCO converts a stub
// (ParseAndConvertConfig: Ignition's spec 2.2 parser, removeIgnDuplicateFilesUnitsUsers, then
// ign-converter's 2.3 to 3.0 translation), so what it converts, content included, is converted
// here and what it refuses is refused, with the field named.
func convertV2Stub(raw []byte) ([]byte, error) {
	v2, rpt, err := ign22.Parse(raw)
	switch {
	case errors.Is(err, ign2errors.ErrUnknownVersion):
		return nil, fmt.Errorf("ignition.version: only spec 2.0 to 2.2 can be converted, as the MCO converts them")
	case err != nil:
		return nil, fmt.Errorf("invalid Ignition spec 2 config: %v %s", err, strings.TrimSpace(rpt.String()))
	}
	if v2, err = dedupeV2(v2); err != nil {
		return nil, err
	}
	// ign-converter's module predates per-iteration loop variables, so every config it merges
	// would point at the last append's source (two appends: "duplicate entry", and the MCO refuses
	// the stub). The appends are translated here instead, each with its own source.
	v23 := ign23.Translate(v2)
	appends := v23.Ignition.Config.Append
	v23.Ignition.Config.Append = nil
	v30, err := v23tov30.Translate(v23, map[string]string{"root": "/"})
	if err != nil {
		return nil, v2FieldError(err)
	}
	for _, r := range appends {
		src := r.Source
		v30.Ignition.Config.Merge = append(v30.Ignition.Config.Merge, ign30types.ConfigReference{Source: &src, Verification: ign30types.Verification{Hash: r.Verification.Hash}})
	}
	cfg := v32translate.Translate(v31translate.Translate(v30))
	cfg.Ignition.Version = UserDataStubVersion
	out, err := marshalStub(cfg)
	if err != nil {
		return nil, err
	}
	if _, rpt, err := ign32.Parse(out); err != nil {
		return nil, fmt.Errorf("%v %s", err, rpt.String())
	}
	return out, nil
}

// dedupeV2 keeps the last entry of each file path and unit name (a later unit's drop-ins added to
// it) and folds every user into the last one with all ssh keys, as the MCO's
// removeIgnDuplicateFilesUnitsUsers does before converting; spec 3 allows no duplicates. Only user
// core is accepted, as there.
func dedupeV2(cfg ign22types.Config) (ign22types.Config, error) {
	seenFile := map[string]bool{}
	var files []ign22types.File
	for i := len(cfg.Storage.Files) - 1; i >= 0; i-- {
		if f := cfg.Storage.Files[i]; !seenFile[f.Path] {
			seenFile[f.Path] = true
			files = append(files, f)
		}
	}
	var units []ign22types.Unit
	unitAt := map[string]int{}
	for i := len(cfg.Systemd.Units) - 1; i >= 0; i-- {
		u := cfg.Systemd.Units[i]
		j, seen := unitAt[u.Name]
		if !seen {
			unitAt[u.Name] = len(units)
			units = append(units, u)
			continue
		}
		for _, d := range u.Dropins {
			if !containsDropin(units[j].Dropins, d.Name) {
				units[j].Dropins = append(units[j].Dropins, d)
			}
		}
	}
	if users := cfg.Passwd.Users; len(users) > 0 {
		for i, u := range users {
			if u.Name != "core" {
				return cfg, fmt.Errorf("passwd.users[%d]: user %q: only user core can be converted, as the MCO converts it", i, u.Name)
			}
		}
		user := users[len(users)-1]
		for i := len(users) - 2; i >= 0; i-- {
			user.SSHAuthorizedKeys = append(user.SSHAuthorizedKeys, users[i].SSHAuthorizedKeys...)
		}
		seenKey := map[ign22types.SSHAuthorizedKey]bool{}
		keys := []ign22types.SSHAuthorizedKey{}
		for _, k := range user.SSHAuthorizedKeys {
			if !seenKey[k] {
				seenKey[k] = true
				keys = append(keys, k)
			}
		}
		user.SSHAuthorizedKeys = keys
		cfg.Passwd.Users = []ign22types.PasswdUser{user}
	}
	cfg.Storage.Files, cfg.Systemd.Units = files, units
	return cfg, nil
}

func containsDropin(dropins []ign22types.SystemdDropin, name string) bool {
	for _, d := range dropins {
		if d.Name == name {
			return true
		}
	}
	return false
}

// v2FieldError names the section of the spec 2 config an ign-converter refusal is about.
func v2FieldError(err error) error {
	var (
		fs     util.NoFilesystemError
		inode  util.DuplicateInodeError
		inodeP *util.DuplicateInodeError
		link   *util.UsesOwnLinkError
		unit   util.DuplicateUnitError
		dropin util.DuplicateDropinError
	)
	field := "config"
	switch {
	case errors.Is(err, util.UsesNetworkdError):
		field = "networkd.units"
	case errors.As(err, &fs):
		field = "storage.filesystems"
	case errors.As(err, &inode), errors.As(err, &inodeP), errors.As(err, &link):
		field = "storage"
	case errors.As(err, &unit), errors.As(err, &dropin):
		field = "systemd.units"
	}
	return fmt.Errorf("%s: %v", field, err)
}

// marshalStub writes cfg without the empty sections the types would add (a pointer-only stub has
// only its ignition section).
func marshalStub(cfg ign32types.Config) ([]byte, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(raw, &sections); err != nil {
		return nil, err
	}
	for k, v := range sections {
		if k != "ignition" && string(v) == "{}" {
			delete(sections, k)
		}
	}
	return json.Marshal(sections)
}
