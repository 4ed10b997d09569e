package bootimage_test

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

const mcsPointer = "https://api-int.demo.example.com:22623/config/worker"

// v2Stub returns a spec 2 stub of version that points at the machine config server, with extra
// top-level sections (JSON members, comma-separated) added.
func v2Stub(version, extra string) []byte {
	s := fmt.Sprintf(`{"ignition":{"version":%q,"config":{"append":[{"source":%q}]}}}`, version, mcsPointer)
	if extra != "" {
		s = s[:len(s)-1] + "," + extra + "}"
	}
	return []byte(s)
}

func upgrade(data []byte) ([]byte, string, error) {
	return bootimage.UpgradeUserData(&bootimage.UserData{SecretName: "worker-user-data", Found: true, Data: data})
}

// converted is the spec 3 stub as generic JSON.
func converted(data []byte) map[string]any {
	GinkgoHelper()
	out, from, err := upgrade(data)
	Expect(err).NotTo(HaveOccurred())
	Expect(from).NotTo(BeEmpty())
	var cfg map[string]any
	Expect(json.Unmarshal(out, &cfg)).To(Succeed())
	Expect(cfg).To(HaveKeyWithValue("ignition", HaveKeyWithValue("version", bootimage.UserDataStubVersion)))
	return cfg
}

// The MCO converts a stub in upgradeStubIgnitionIfRequired (pkg/controller/bootimage/helpers.go)
// with ParseAndConvertConfig (pkg/controller/common/helpers.go): each row names the part of it
// whose answer it pins.
var _ = Describe("UpgradeUserData of a spec 2 stub", func() {
	DescribeTable("converts what the MCO converts",
		func(data []byte, check func(map[string]any)) { check(converted(data)) },
		Entry("issue 20: a 2.2 stub with a file, a unit and core's key besides the pointer (ParseAndConvertConfig)",
			v2Stub("2.2.0", `"storage":{"files":[{"filesystem":"root","path":"/etc/motd","mode":420,"contents":{"source":"data:,hello"}}]},`+
				`"systemd":{"units":[{"name":"hello.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n"}]},`+
				`"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA core"]}]}`),
			func(cfg map[string]any) {
				Expect(cfg).To(HaveKeyWithValue("ignition", HaveKeyWithValue("config", HaveKeyWithValue("merge", ConsistOf(HaveKeyWithValue("source", mcsPointer))))))
				Expect(cfg).To(HaveKeyWithValue("storage", HaveKeyWithValue("files", ConsistOf(And(
					HaveKeyWithValue("path", "/etc/motd"), HaveKeyWithValue("mode", BeEquivalentTo(420)),
					HaveKeyWithValue("overwrite", true), // spec 2 overwrote files
					HaveKeyWithValue("contents", HaveKeyWithValue("source", "data:,hello")))))))
				Expect(cfg).To(HaveKeyWithValue("systemd", HaveKeyWithValue("units", ConsistOf(And(
					HaveKeyWithValue("name", "hello.service"), HaveKeyWithValue("enabled", true))))))
				Expect(cfg).To(HaveKeyWithValue("passwd", HaveKeyWithValue("users", ConsistOf(And(
					HaveKeyWithValue("name", "core"), HaveKeyWithValue("sshAuthorizedKeys", ConsistOf("ssh-ed25519 AAAA core")))))))
			}),
		Entry("a 2.1 stub, read by Ignition's 2.2 parser (ign2.Parse)", v2Stub("2.1.0", ""), func(cfg map[string]any) {
			Expect(cfg).To(HaveKeyWithValue("ignition", HaveKeyWithValue("config", HaveKeyWithValue("merge", HaveLen(1)))))
		}),
		Entry("duplicate files and units: the last wins, drop-ins of both kept (removeIgnDuplicateFilesUnitsUsers)",
			v2Stub("2.2.0", `"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,first"}},{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,second"}}]},`+
				`"systemd":{"units":[{"name":"x.service","dropins":[{"name":"10-a.conf","contents":"[Unit]\n"}]},{"name":"x.service","contents":"[Service]\n","dropins":[{"name":"20-b.conf","contents":"[Unit]\n"}]}]}`),
			func(cfg map[string]any) {
				Expect(cfg).To(HaveKeyWithValue("storage", HaveKeyWithValue("files", ConsistOf(HaveKeyWithValue("contents", HaveKeyWithValue("source", "data:,second"))))))
				Expect(cfg).To(HaveKeyWithValue("systemd", HaveKeyWithValue("units", ConsistOf(And(
					HaveKeyWithValue("contents", "[Service]\n"),
					HaveKeyWithValue("dropins", ConsistOf(HaveKeyWithValue("name", "20-b.conf"), HaveKeyWithValue("name", "10-a.conf"))))))))
			}),
		Entry("several core entries fold into one with every key once (removeIgnDuplicateFilesUnitsUsers, dedupePasswdUserSSHKeys)",
			v2Stub("2.2.0", `"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k1","k2"]},{"name":"core","sshAuthorizedKeys":["k2","k3"]}]}`),
			func(cfg map[string]any) {
				Expect(cfg).To(HaveKeyWithValue("passwd", HaveKeyWithValue("users", ConsistOf(HaveKeyWithValue("sshAuthorizedKeys", Equal([]any{"k2", "k3", "k1"}))))))
			}),
		Entry("a file with append becomes a spec 3 append, overwrite off (v23tov30.Translate)",
			v2Stub("2.2.0", `"storage":{"files":[{"filesystem":"root","path":"/etc/hosts","append":true,"contents":{"source":"data:,10.0.0.1%20x"}}]}`),
			func(cfg map[string]any) {
				Expect(cfg).To(HaveKeyWithValue("storage", HaveKeyWithValue("files", ConsistOf(And(
					HaveKeyWithValue("overwrite", false), HaveKeyWithValue("append", ConsistOf(HaveKeyWithValue("source", "data:,10.0.0.1%20x"))))))))
			}),
		Entry("two appended configs keep their own sources (ign-converter would repeat the last)",
			[]byte(`{"ignition":{"version":"2.2.0","config":{"append":[{"source":"https://a.example.com/one"},{"source":"https://b.example.com/two"}]}}}`),
			func(cfg map[string]any) {
				Expect(cfg).To(HaveKeyWithValue("ignition", HaveKeyWithValue("config", HaveKeyWithValue("merge", Equal([]any{
					map[string]any{"source": "https://a.example.com/one", "verification": map[string]any{}},
					map[string]any{"source": "https://b.example.com/two", "verification": map[string]any{}},
				})))))
			}),
		Entry("the pre-4.6 installer's stub: only the ignition section", []byte(fixtures.IgnitionStubV2), func(cfg map[string]any) {
			Expect(cfg).To(HaveLen(1))
		}),
	)

	DescribeTable("refuses what the MCO refuses, naming the field",
		func(data []byte, field string) {
			out, _, err := upgrade(data)
			Expect(out).To(BeNil())
			Expect(err).To(MatchError(And(
				ContainSubstring("user-data Secret openshift-machine-api/worker-user-data: Ignition"),
				ContainSubstring("cannot be converted to spec 3"),
				ContainSubstring(field))))
		},
		Entry("spec 2.3, which the MCO's 2.2 parser does not read (IgnParseWrapper)", v2Stub("2.3.0", ""), "ignition.version"),
		Entry("a networkd section (v23tov30.Check2_3)", v2Stub("2.2.0", `"networkd":{"units":[{"name":"00-eth0.network","contents":"[Match]\nName=eth0\n"}]}`), "networkd.units"),
		Entry("a user other than core (removeIgnDuplicateFilesUnitsUsers)", v2Stub("2.2.0", `"passwd":{"users":[{"name":"core"},{"name":"alice","sshAuthorizedKeys":["k"]}]}`), `passwd.users[1]: user "alice"`),
		Entry("a filesystem other than root (v23tov30.Check2_3)", v2Stub("2.2.0", `"storage":{"filesystems":[{"name":"var","mount":{"device":"/dev/sdb","format":"xfs"}}],"files":[{"filesystem":"var","path":"/x","contents":{"source":"data:,x"}}]}`), "storage.filesystems"),
		Entry("a file and a directory on one path (v23tov30.Check2_3)", v2Stub("2.2.0", `"storage":{"files":[{"filesystem":"root","path":"/etc/x","contents":{"source":"data:,x"}}],"directories":[{"filesystem":"root","path":"/etc/x"}]}`), "storage: Config has conflicting inodes"),
		Entry("a relative file path (ign2.Parse)", v2Stub("2.2.0", `"storage":{"files":[{"filesystem":"root","path":"etc/x","contents":{"source":"data:,x"}}]}`), "invalid Ignition spec 2 config"),
	)
})
