package refresh_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"net/url"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

func TestRefresh(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "refresh")
}

// Encodings of file contents, all meaning the same bytes.
func b64(s string) string { return "data:;base64," + base64.StdEncoding.EncodeToString([]byte(s)) }
func pct(s string) string { return "data:," + url.PathEscape(s) }
func gz(s string) string {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return "data:;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

func ptr[T any](v T) *T { return &v }

// cfg is a node config built up by options.
type cfgOpt func(*refresh.Spec)

func config(opts ...cfgOpt) refresh.Config {
	c := refresh.Spec{Ignition: ign.Config{Ignition: ign.Ignition{Version: refresh.IgnitionVersion}}, OSImageURL: "quay.io/openshift/rhcos@sha256:aaa"}
	for _, o := range opts {
		o(&c)
	}
	return refresh.FromSpec(c)
}

func withFile(path, source string, mode int) cfgOpt {
	return func(c *refresh.Spec) {
		f := ign.File{Node: ign.Node{Path: path}, FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr(source)}, Mode: ptr(mode)}}
		c.Ignition.Storage.Files = append(c.Ignition.Storage.Files, f)
	}
}

func withGzipFile(path, contents string) cfgOpt {
	return func(c *refresh.Spec) {
		f := ign.File{Node: ign.Node{Path: path}, FileEmbedded1: ign.FileEmbedded1{Contents: ign.Resource{Source: ptr(gz(contents)), Compression: ptr("gzip")}, Mode: ptr(0o644)}}
		c.Ignition.Storage.Files = append(c.Ignition.Storage.Files, f)
	}
}

func withUnit(name, contents string, dropins ...ign.Dropin) cfgOpt {
	return func(c *refresh.Spec) {
		c.Ignition.Systemd.Units = append(c.Ignition.Systemd.Units, ign.Unit{Name: name, Contents: ptr(contents), Enabled: ptr(true), Dropins: dropins})
	}
}

func withSSHKeys(keys ...string) cfgOpt {
	return func(c *refresh.Spec) {
		u := ign.PasswdUser{Name: "core"}
		for _, k := range keys {
			u.SSHAuthorizedKeys = append(u.SSHAuthorizedKeys, ign.SSHAuthorizedKey(k))
		}
		c.Ignition.Passwd.Users = append(c.Ignition.Passwd.Users, u)
	}
}

func decide(old, new refresh.Config, policies refresh.Policies) refresh.Result {
	GinkgoHelper()
	changes, err := refresh.Diff(old, new)
	Expect(err).NotTo(HaveOccurred())
	return refresh.Decide(changes, policies)
}
