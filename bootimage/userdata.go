package bootimage

import (
	"encoding/json"
	"fmt"
	"strings"

	ignconfig "github.com/coreos/ignition/v2/config"
	ign32 "github.com/coreos/ignition/v2/config/v3_2"
	ign32types "github.com/coreos/ignition/v2/config/v3_2/types"
)

// UserDataStubVersion is the Ignition version a spec 2 stub is upgraded to: the oldest spec 3
// that every RHCOS 4.x boot image reads.
const UserDataStubVersion = "3.2.0"

// ignitionV2Stub is the part of an Ignition spec 2 config a user-data stub uses.
type ignitionV2Stub struct {
	Ignition struct {
		Config struct {
			Append  []v2Resource `json:"append"`
			Replace *v2Resource  `json:"replace"`
		} `json:"config"`
		Security struct {
			TLS struct {
				CertificateAuthorities []v2Resource `json:"certificateAuthorities"`
			} `json:"tls"`
		} `json:"security"`
		Timeouts struct {
			HTTPResponseHeaders *int `json:"httpResponseHeaders"`
			HTTPTotal           *int `json:"httpTotal"`
		} `json:"timeouts"`
		Version string `json:"version"`
	} `json:"ignition"`
	Storage  map[string]json.RawMessage `json:"storage"`
	Systemd  map[string]json.RawMessage `json:"systemd"`
	Passwd   map[string]json.RawMessage `json:"passwd"`
	Networkd map[string]json.RawMessage `json:"networkd"`
}

type v2Resource struct {
	Source       string `json:"source"`
	Verification struct {
		Hash *string `json:"hash"`
	} `json:"verification"`
}

func (r v2Resource) v3() ign32types.Resource {
	src := r.Source
	return ign32types.Resource{Source: &src, Verification: ign32types.Verification{Hash: r.Verification.Hash}}
}

// UpgradeUserData checks a user-data stub. A spec 3 stub is returned as nil (nothing to do); a
// spec 2 stub is translated to spec 3.2.0, since new boot images cannot read spec 2, and returned
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
		out, err := translateV2Stub(u.Data)
		if err != nil {
			return nil, "", fmt.Errorf("%s: Ignition %s stub cannot be upgraded to %s: %v", where, v, UserDataStubVersion, err)
		}
		return out, v, nil
	default:
		return nil, "", fmt.Errorf("%s: unsupported Ignition version %q", where, v)
	}
}

// translateV2Stub turns a spec 2 stub (config sources, CA bundles, timeouts) into spec 3.2.0 and
// validates the result with Ignition's own parser. A "stub" with real content (files, units,
// users) is refused rather than translated half-way.
func translateV2Stub(raw []byte) ([]byte, error) {
	var v2 ignitionV2Stub
	if err := json.Unmarshal(raw, &v2); err != nil {
		return nil, err
	}
	for section, m := range map[string]map[string]json.RawMessage{"storage": v2.Storage, "systemd": v2.Systemd, "passwd": v2.Passwd, "networkd": v2.Networkd} {
		for key, value := range m {
			if s := strings.TrimSpace(string(value)); s != "null" && s != "[]" && s != "{}" {
				return nil, fmt.Errorf("it has %s.%s content; only a pointer to the machine config server can be upgraded", section, key)
			}
		}
	}
	var cfg ign32types.Config
	cfg.Ignition.Version = UserDataStubVersion
	for _, r := range v2.Ignition.Config.Append {
		cfg.Ignition.Config.Merge = append(cfg.Ignition.Config.Merge, r.v3())
	}
	if r := v2.Ignition.Config.Replace; r != nil && r.Source != "" {
		cfg.Ignition.Config.Replace = r.v3()
	}
	for _, r := range v2.Ignition.Security.TLS.CertificateAuthorities {
		cfg.Ignition.Security.TLS.CertificateAuthorities = append(cfg.Ignition.Security.TLS.CertificateAuthorities, r.v3())
	}
	cfg.Ignition.Timeouts = ign32types.Timeouts{HTTPResponseHeaders: v2.Ignition.Timeouts.HTTPResponseHeaders, HTTPTotal: v2.Ignition.Timeouts.HTTPTotal}
	// A stub has only the ignition section; the empty storage, systemd and passwd sections that
	// the types would add are left out.
	out, err := json.Marshal(map[string]any{"ignition": cfg.Ignition})
	if err != nil {
		return nil, err
	}
	if _, rpt, err := ign32.Parse(out); err != nil {
		return nil, fmt.Errorf("%v %s", err, rpt.String())
	}
	return out, nil
}
