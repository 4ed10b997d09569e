package render_test

import (
	"testing"

	ign35 "github.com/coreos/ignition/v2/config/v3_5"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/render"
)

func TestRender(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "render")
}

// The rows below are the MCO's own cases (machine-config-operator pkg/controller/common
// helpers_test.go and pkg/controller/render render_controller_test.go), each named after its test.

const base = "quay.io/openshift/rhcos@sha256:base"

type mcOpt func(*mcfgv1.MachineConfig)

// machineConfig is a MachineConfig for role with opts applied.
func machineConfig(name, role string, opts ...mcOpt) *mcfgv1.MachineConfig {
	mc := &mcfgv1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{render.RoleLabel: role}}}
	for _, o := range opts {
		o(mc)
	}
	return mc
}

func ignition(json string) mcOpt {
	return func(mc *mcfgv1.MachineConfig) { mc.Spec.Config = runtime.RawExtension{Raw: []byte(json)} }
}
func fips(mc *mcfgv1.MachineConfig) { mc.Spec.FIPS = true }
func osImage(url string) mcOpt      { return func(mc *mcfgv1.MachineConfig) { mc.Spec.OSImageURL = url } }
func kernelType(t string) mcOpt     { return func(mc *mcfgv1.MachineConfig) { mc.Spec.KernelType = t } }
func kargs(a ...string) mcOpt       { return func(mc *mcfgv1.MachineConfig) { mc.Spec.KernelArguments = a } }
func extensions(e ...string) mcOpt  { return func(mc *mcfgv1.MachineConfig) { mc.Spec.Extensions = e } }
func generated(mc *mcfgv1.MachineConfig) {
	mc.Annotations = map[string]string{render.GeneratedByAnnotation: "abc"}
}
func file(path, source, extra string) string {
	return `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"` + path + `","mode":420,"user":{"name":"root"},"contents":{"source":"` + source + `"` + extra + `}}]}}`
}

// Gzipped file contents; gzFoo is the MCO's own, from TestIgnitionMergeCompressed.
const (
	gzFoo        = "data:;base64,H4sIAAAAAAAAA0vLz+cCAKhlMn4EAAAA"
	gzOld        = "data:;base64,H4sIAAAAAAACA8vPSQEA5dRdPwMAAAA="
	gzHelloWorld = "data:;base64,H4sIAAAAAAACA8tIzcnJVyjPL8pJAQCFEUoNCwAAAA=="
)

// gzFile is an Ignition config with one gzipped file.
func gzFile(path, source string) string { return file(path, source, `,"compression":"gzip"`) }

// parsed is an Ignition config in spec 3.5, as Render returns it. Table entries are built
// before any spec runs, so a broken literal panics.
func parsed(json string) ign.Config {
	cfg, _, err := ign35.ParseCompatibleVersion([]byte(json))
	if err != nil {
		panic(err)
	}
	return cfg
}

// spec is a rendered MachineConfig's fields, its Ignition config parsed.
type spec struct {
	Ignition        ign.Config
	OSImageURL      string
	KernelArguments []string
	FIPS            bool
	KernelType      string
	Extensions      []string
}

func specOf(mc *mcfgv1.MachineConfig) spec {
	GinkgoHelper()
	cfg, _, err := ign35.ParseCompatibleVersion(mc.Spec.Config.Raw)
	Expect(err).NotTo(HaveOccurred())
	return spec{Ignition: cfg, OSImageURL: mc.Spec.OSImageURL, KernelArguments: mc.Spec.KernelArguments, FIPS: mc.Spec.FIPS,
		KernelType: mc.Spec.KernelType, Extensions: mc.Spec.Extensions}
}

// defaults is what Render returns for configs that set nothing.
func defaults(opts ...func(*spec)) spec {
	c := spec{Ignition: ign.Config{Ignition: ign.Ignition{Version: ign.MaxVersion.String()}}, OSImageURL: base,
		KernelType: render.KernelTypeDefault, KernelArguments: []string{}, Extensions: []string{}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

var _ = DescribeTable("Render merges a pool's MachineConfigs as the MCO does",
	func(configs []*mcfgv1.MachineConfig, want spec) {
		got, err := render.Render(configs, base)
		Expect(err).NotTo(HaveOccurred())
		Expect(specOf(got)).To(Equal(want))
	},
	Entry("TestMergeMachineConfigs: one config that sets FIPS gets every other default",
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker", fips)},
		defaults(func(c *spec) { c.FIPS = true })),
	Entry("TestMergeMachineConfigs: every field, in name order (extension testExtensions is usbguard here: we validate extensions)",
		[]*mcfgv1.MachineConfig{
			machineConfig("osimageurl", "worker", osImage("overriddenURL")),
			machineConfig("kargs", "worker", kargs("testKarg", "kargFromIgnitionDowngrade")),
			machineConfig("kerneltype", "worker", kernelType(render.KernelTypeRealtime)),
			machineConfig("extension", "worker", extensions("usbguard")),
			machineConfig("ssh", "worker", ignition(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["5678"]}]}}`)),
			machineConfig("fips", "worker", fips),
			machineConfig("passwd", "worker", ignition(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","passwordHash":"testpass"}]}}`)),
			machineConfig("ssh", "worker", ignition(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["1234"]}]}}`)),
		},
		spec{
			Ignition:   parsed(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["5678","1234"],"passwordHash":"testpass"}]}}`),
			OSImageURL: "overriddenURL", KernelArguments: []string{"testKarg", "kargFromIgnitionDowngrade"}, FIPS: true,
			KernelType: render.KernelTypeRealtime, Extensions: []string{"usbguard"},
		}),
	Entry("TestMergeMachineConfigs: a custom pool's config overrides the worker's, later names override earlier ones",
		[]*mcfgv1.MachineConfig{
			machineConfig("ccc", "infra", ignition(file("/etc/test2", "data:,new", ""))),
			machineConfig("aaa", "worker", ignition(file("/etc/test1", "data:,old", ""))),
			machineConfig("bbb", "worker", ignition(file("/etc/test1", "data:,new", ""))),
			machineConfig("ddd", "worker", ignition(gzFile("/etc/test2", gzOld))),
		},
		defaults(func(c *spec) {
			c.Ignition = parsed(`{"ignition":{"version":"3.2.0"},"storage":{"files":[
				{"path":"/etc/test1","mode":420,"overwrite":true,"user":{"name":"root"},"contents":{"source":"data:,new"}},
				{"path":"/etc/test2","mode":420,"overwrite":true,"user":{"name":"root"},"contents":{"source":"data:,new"}}]}}`)
		})),
	Entry("TestSetDefaultFileOverwrite: a file without overwrite gets true, false stays",
		[]*mcfgv1.MachineConfig{machineConfig("overwrite", "worker", ignition(`{"ignition":{"version":"3.2.0"},"storage":{"files":[
			{"path":"/etc/testfileconfig1","mode":420,"contents":{"source":"data:,test"}},
			{"path":"/etc/testfileconfig2","mode":420,"overwrite":false,"contents":{"source":"data:,test"}}]}}`))},
		defaults(func(c *spec) {
			c.Ignition = parsed(`{"ignition":{"version":"3.2.0"},"storage":{"files":[
				{"path":"/etc/testfileconfig1","mode":420,"overwrite":true,"contents":{"source":"data:,test"}},
				{"path":"/etc/testfileconfig2","mode":420,"overwrite":false,"contents":{"source":"data:,test"}}]}}`)
		})),
	Entry("TestIgnitionMergeCompressed: plain contents replacing gzipped ones drop the compression",
		[]*mcfgv1.MachineConfig{
			machineConfig("00-a", "worker", ignition(gzFile("/etc/testfileconfig", gzFoo))),
			machineConfig("01-b", "worker", ignition(file("/etc/testfileconfig", "data:,hello%20world", ""))),
		},
		defaults(func(c *spec) {
			c.Ignition = parsed(`{"ignition":{"version":"3.2.0"},"storage":{"files":[
				{"path":"/etc/testfileconfig","mode":420,"overwrite":true,"user":{"name":"root"},"contents":{"source":"data:,hello%20world"}}]}}`)
		})),
	Entry("TestGenerateMachineConfigOverrideOSImageURL: the last MachineConfig by name sets the OS image",
		[]*mcfgv1.MachineConfig{
			machineConfig("00-test-cluster-master-1", "master", osImage("dummy-change-2")),
			machineConfig("00-test-cluster-master", "master", osImage("dummy-test-1")),
			machineConfig("00-test-cluster-master-0", "master", osImage("dummy-change")),
		},
		defaults(func(c *spec) { c.OSImageURL = "dummy-change-2" })),
	Entry("MergeMachineConfigs: a generated MachineConfig cannot override the OS image",
		[]*mcfgv1.MachineConfig{machineConfig("00-worker", "worker", osImage("quay.io/old"), generated)},
		defaults()),
	Entry("TestIgnValidationGenerateRenderedMachineConfig: an empty Ignition config with a kernel argument renders",
		[]*mcfgv1.MachineConfig{machineConfig("05-extra", "worker", ignition(`{"ignition":{"version":"3.5.0"}}`), kargs("test1"))},
		defaults(func(c *spec) { c.KernelArguments = []string{"test1"} })),
)

var _ = DescribeTable("Render refuses what the MCO refuses, naming the MachineConfig and field",
	func(mc *mcfgv1.MachineConfig, message string) {
		_, err := render.Render([]*mcfgv1.MachineConfig{machineConfig("00-worker", "worker"), mc}, base)
		Expect(err).To(MatchError(ContainSubstring(message)))
	},
	Entry("TestIgnValidationGenerateRenderedMachineConfig: an Ignition config without a version",
		machineConfig("05-extra", "worker", ignition(`{"ignition":{"version":""},"storage":{"files":[{"path":"/dummy/1"}]}}`)),
		"MachineConfig 05-extra spec.config: invalid Ignition config"),
	Entry("IgnParseWrapper: spec 3.6, newer than the MCO reads",
		machineConfig("05-extra", "worker", ignition(`{"ignition":{"version":"3.6.0"}}`)),
		"MachineConfig 05-extra spec.config: invalid Ignition config: unsupported config version"),
	Entry("TestValidateMachineConfigExtensions: an unsupported extension",
		machineConfig("99-ext", "worker", extensions("usbguard", "nope")), "MachineConfig 99-ext spec.extensions: nope not supported"),
	Entry("ValidateMachineConfig: an unknown kernel type",
		machineConfig("99-rt", "worker", kernelType("fast")), `MachineConfig 99-rt spec.kernelType: "fast" is not one of`),
	Entry("MergeMachineConfigs: kernel-devel with the realtime kernel",
		machineConfig("99-rt", "worker", kernelType(render.KernelTypeRealtime), extensions("kernel-devel")), "kernel-devel needs the default kernel"),
)

var _ = Describe("Selects", func() {
	pool := func(selector *metav1.LabelSelector) *mcfgv1.MachineConfigPool {
		return &mcfgv1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "worker"}, Spec: mcfgv1.MachineConfigPoolSpec{MachineConfigSelector: selector}}
	}
	worker := machineConfig("00-worker", "worker")
	master := machineConfig("00-master", "master")

	It("matches the pool's selector against the MachineConfig's labels (TestGetMachineConfigsForPool)", func() {
		p := pool(&metav1.LabelSelector{MatchLabels: map[string]string{render.RoleLabel: "worker"}})
		Expect(render.Selects(p, worker)).To(BeTrue())
		Expect(render.Selects(p, master)).To(BeFalse())
		infra := pool(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: render.RoleLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"worker", "infra"}}}})
		Expect(render.Selects(infra, worker)).To(BeTrue())
	})

	It("selects nothing with a nil or empty selector (getPoolsForMachineConfig)", func() {
		Expect(render.Selects(pool(nil), worker)).To(BeFalse())
		Expect(render.Selects(pool(&metav1.LabelSelector{}), worker)).To(BeFalse())
	})

	It("names the pool when its selector is invalid", func() {
		p := pool(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}})
		_, err := render.Selects(p, worker)
		Expect(err).To(MatchError(ContainSubstring("MachineConfigPool worker spec.machineConfigSelector")))
	})
})

var _ = DescribeTable("A pool's change, rendered and decided with the default policies",
	func(current, updated []*mcfgv1.MachineConfig, outcome refresh.Outcome, rule string) {
		old, err := render.Render(current, base)
		Expect(err).NotTo(HaveOccurred())
		next, err := render.Render(updated, base)
		Expect(err).NotTo(HaveOccurred())
		from, err := refresh.FromMachineConfig(old)
		Expect(err).NotTo(HaveOccurred())
		to, err := refresh.FromMachineConfig(next)
		Expect(err).NotTo(HaveOccurred())
		changes, err := refresh.Diff(from, to)
		Expect(err).NotTo(HaveOccurred())
		res := refresh.Decide(changes, refresh.DefaultPolicies())
		Expect(res.Outcome).To(Equal(outcome))
		if rule != "" {
			Expect(res.Changes).To(ContainElement(HaveField("Rule", ContainSubstring(rule))))
		}
	},
	Entry("TestGenerateMachineConfigValidation: turning FIPS on is refused on a running pool",
		[]*mcfgv1.MachineConfig{machineConfig("00-test-cluster-master", "master")},
		[]*mcfgv1.MachineConfig{machineConfig("00-test-cluster-master", "master"), machineConfig("00-test-cluster-master-0", "master", fips)},
		refresh.Reject, "fips"),
	Entry("TestGenerateMachineConfigOverrideOSImageURL: a later OS image override reboots",
		[]*mcfgv1.MachineConfig{machineConfig("00-test-cluster-master-0", "master", osImage("dummy-change"))},
		[]*mcfgv1.MachineConfig{machineConfig("00-test-cluster-master-0", "master", osImage("dummy-change")), machineConfig("00-test-cluster-master-1", "master", osImage("dummy-change-2"))},
		refresh.Reboot, "osImage"),
	Entry("TestMergeMachineConfigs: kernel arguments reboot",
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker")},
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker"), machineConfig("kargs", "worker", kargs("testKarg"))},
		refresh.Reboot, "kernelArguments"),
	Entry("TestMergeMachineConfigs: the realtime kernel reboots",
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker")},
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker"), machineConfig("kerneltype", "worker", kernelType(render.KernelTypeRealtime))},
		refresh.Reboot, "kernelType"),
	Entry("TestMergeMachineConfigs: an extension reboots",
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker")},
		[]*mcfgv1.MachineConfig{machineConfig("fips", "worker"), machineConfig("extension", "worker", extensions("usbguard"))},
		refresh.Reboot, "extensions"),
	Entry("TestMergeMachineConfigs: core's merged ssh keys follow the sshkey policy (None)",
		[]*mcfgv1.MachineConfig{machineConfig("ssh", "worker", ignition(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["5678"]}]}}`))},
		[]*mcfgv1.MachineConfig{
			machineConfig("ssh", "worker", ignition(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["5678"]}]}}`)),
			machineConfig("ssh2", "worker", ignition(`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["1234"]}]}}`)),
		},
		refresh.InPlace, "sshkey policy"),
	Entry("TestMergeMachineConfigs: a custom pool's file replacing the worker's reboots without a file policy",
		[]*mcfgv1.MachineConfig{machineConfig("ddd", "worker", ignition(gzFile("/etc/test2", gzOld)))},
		[]*mcfgv1.MachineConfig{machineConfig("ddd", "worker", ignition(gzFile("/etc/test2", gzOld))), machineConfig("ccc", "infra", ignition(file("/etc/test2", "data:,new", "")))},
		refresh.Reboot, "no file policy matches /etc/test2"),
	Entry("TestIgnitionMergeCompressed: the same bytes, re-encoded without gzip, change nothing",
		[]*mcfgv1.MachineConfig{machineConfig("00-a", "worker", ignition(gzFile("/etc/testfileconfig", gzHelloWorld)))},
		[]*mcfgv1.MachineConfig{machineConfig("00-a", "worker", ignition(gzFile("/etc/testfileconfig", gzHelloWorld))), machineConfig("01-b", "worker", ignition(file("/etc/testfileconfig", "data:,hello%20world", "")))},
		refresh.NoChange, ""),
	Entry("TestSetDefaultFileOverwrite: writing down overwrite: true changes nothing",
		[]*mcfgv1.MachineConfig{machineConfig("overwrite", "worker", ignition(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,x"}}]}}`))},
		[]*mcfgv1.MachineConfig{machineConfig("overwrite", "worker", ignition(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/a","overwrite":true,"contents":{"source":"data:,x"}}]}}`))},
		refresh.NoChange, ""),
)
