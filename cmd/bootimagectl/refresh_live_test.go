package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/render"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const (
	rhcos   = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111"
	chronyA = "data:,server%20a.example.com%20iburst%0A"
	chronyB = "data:,server%20b.example.com%20iburst%0A"
	sshKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIK0wmN/Cr3JXqmLW7u+g9pTh+wyqDHpSQEIQczXkVx9q admin"
)

// workerMachineConfig is a MachineConfig for the worker role with an Ignition config and opts.
func workerMachineConfig(name, ignition string, opts ...func(*mcfgv1.MachineConfig)) *mcfgv1.MachineConfig {
	mc := &mcfgv1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{render.RoleLabel: "worker"}},
		Spec:       mcfgv1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ignition)}},
	}
	for _, o := range opts {
		o(mc)
	}
	return mc
}

func chronyConfig(source string) string {
	return `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/chrony.conf","mode":420,"overwrite":true,"contents":{"source":"` + source + `"}}]}}`
}

// poolMachineConfigs are the three MachineConfigs of the worker pool: the MCO's generated one,
// the admin's chrony and ssh key.
func poolMachineConfigs() []client.Object {
	return []client.Object{
		workerMachineConfig("00-worker", `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/kubernetes/kubelet.conf","mode":420,"contents":{"source":"data:,kind%3A%20KubeletConfiguration"}}]},"systemd":{"units":[{"name":"kubelet.service","enabled":true,"contents":"[Unit]\nDescription=Kubernetes Kubelet\n"}]}}`,
			func(mc *mcfgv1.MachineConfig) {
				mc.Annotations = map[string]string{render.GeneratedByAnnotation: "4a2c1f"}
			}),
		workerMachineConfig("99-worker-chrony", chronyConfig(chronyA)),
		workerMachineConfig("99-worker-ssh", `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["`+sshKey+`"]}]}}`),
	}
}

// renderedWorker is the pool's rendered config as the MCO wrote it: Ignition 3.5.0, overwrite set.
func renderedWorker(name string) *mcfgv1.MachineConfig {
	return &mcfgv1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{render.GeneratedByAnnotation: "4a2c1f"}},
		Spec: mcfgv1.MachineConfigSpec{
			OSImageURL: rhcos, KernelType: render.KernelTypeDefault,
			Config: runtime.RawExtension{Raw: []byte(`{"ignition":{"version":"3.5.0"},
"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["` + sshKey + `"]}]},
"storage":{"files":[
 {"path":"/etc/chrony.conf","mode":420,"overwrite":true,"contents":{"source":"` + chronyA + `"}},
 {"path":"/etc/kubernetes/kubelet.conf","mode":420,"overwrite":true,"contents":{"source":"data:,kind%3A%20KubeletConfiguration"}}]},
"systemd":{"units":[{"name":"kubelet.service","enabled":true,"contents":"[Unit]\nDescription=Kubernetes Kubelet\n"}]}}`)},
		},
	}
}

// pool is a MachineConfigPool and the status the MCO's controllers write for it.
func pool(name string, selector *metav1.LabelSelector, rendered string, machines int32, paused bool, maxUnavailable *intstr.IntOrString) (*mcfgv1.MachineConfigPool, mcfgv1.MachineConfigPoolStatus) {
	p := &mcfgv1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       mcfgv1.MachineConfigPoolSpec{MachineConfigSelector: selector, Paused: paused, MaxUnavailable: maxUnavailable},
	}
	status := mcfgv1.MachineConfigPoolStatus{MachineCount: machines, UpdatedMachineCount: machines, ReadyMachineCount: machines}
	status.Configuration.Name = rendered
	for _, mc := range poolMachineConfigs() {
		status.Configuration.Source = append(status.Configuration.Source, corev1.ObjectReference{APIVersion: mcfgv1.GroupVersion.String(), Kind: "MachineConfig", Name: mc.GetName()})
	}
	return p, status
}

// writeMachineConfig writes mc as YAML into dir and returns the path.
func writeMachineConfig(dir string, mc *mcfgv1.MachineConfig) string {
	GinkgoHelper()
	mc.SetGroupVersionKind(mcfgv1.GroupVersion.WithKind("MachineConfig"))
	data, err := yaml.Marshal(mc)
	Expect(err).NotTo(HaveOccurred())
	p := filepath.Join(dir, mc.Name+".yaml")
	Expect(os.WriteFile(p, data, 0o600)).To(Succeed())
	return p
}

func readFile(path string) string {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// Ordered for its BeforeAll: one API server seeded with pools and rendered configs, which the
// specs plan against; ContinueOnFailure so one failed preview does not hide the others.
var _ = Describe("bootimagectl refresh plan on a cluster", Ordered, ContinueOnFailure, func() {
	var (
		c          client.Client
		kubeconfig string
		dir        string
	)
	ctx := context.Background()
	write := func(mc *mcfgv1.MachineConfig) string { return writeMachineConfig(dir, mc) }
	setPolicies := func(policies refresh.Policies) {
		GinkgoHelper()
		mc := &operatorv1.MachineConfiguration{}
		Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		before := mc.DeepCopy()
		mc.Status.NodeDisruptionPolicyStatus.ClusterPolicies = policies
		Expect(c.Status().Patch(ctx, mc, client.MergeFrom(before))).To(Succeed())
	}
	// versions are the resourceVersions of everything the command reads, to show it wrote nothing.
	versions := func() map[string]string {
		GinkgoHelper()
		out := map[string]string{}
		var mcs mcfgv1.MachineConfigList
		Expect(c.List(ctx, &mcs)).To(Succeed())
		for _, o := range mcs.Items {
			out["MachineConfig/"+o.Name] = o.ResourceVersion
		}
		var pools mcfgv1.MachineConfigPoolList
		Expect(c.List(ctx, &pools)).To(Succeed())
		for _, o := range pools.Items {
			out["MachineConfigPool/"+o.Name] = o.ResourceVersion
		}
		var mcfg operatorv1.MachineConfigurationList
		Expect(c.List(ctx, &mcfg)).To(Succeed())
		for _, o := range mcfg.Items {
			out["MachineConfiguration/"+o.Name] = o.ResourceVersion
		}
		return out
	}
	// runLive runs the command and fails when the cluster changed meanwhile.
	runLive := func(args ...string) (int, string, string) {
		GinkgoHelper()
		before := versions()
		code, out, stderr := runCLI(append([]string{"refresh", "plan", "--kubeconfig", kubeconfig}, args...)...)
		Expect(versions()).To(Equal(before), "refresh plan wrote to the cluster")
		return code, out, stderr
	}
	// livePlan runs the command with -o json and decodes its plan.
	livePlan := func(args ...string) LivePlan {
		GinkgoHelper()
		code, out, stderr := runLive(append(args, "-o", "json")...)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		var p LivePlan
		Expect(json.Unmarshal([]byte(out), &p)).To(Succeed())
		return p
	}

	BeforeAll(func() {
		env := testenv.StartForSpecs(testenv.Options{})
		var err error
		c, err = client.New(env.Config, client.Options{Scheme: liveScheme()})
		Expect(err).NotTo(HaveOccurred())
		dir = GinkgoT().TempDir()
		kubeconfig = filepath.Join(dir, "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())

		Expect(fixtures.Create(ctx, c, fixtures.MachineConfiguration(nil))).To(Succeed())
		Expect(fixtures.Create(ctx, c, append(poolMachineConfigs(), renderedWorker("rendered-worker-1"), renderedWorker("rendered-infra-1"))...)).To(Succeed())
		half := intstr.FromString("50%")
		for _, p := range []struct {
			name           string
			selector       *metav1.LabelSelector
			rendered       string
			machines       int32
			paused         bool
			maxUnavailable *intstr.IntOrString
		}{
			{"worker", &metav1.LabelSelector{MatchLabels: map[string]string{render.RoleLabel: "worker"}}, "rendered-worker-1", 3, false, nil},
			// A custom pool inherits the worker's MachineConfigs.
			{"infra", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: render.RoleLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"worker", "infra"}}}}, "rendered-infra-1", 4, true, &half},
		} {
			obj, status := pool(p.name, p.selector, p.rendered, p.machines, p.paused, p.maxUnavailable)
			Expect(c.Create(ctx, obj)).To(Succeed())
			patch := client.MergeFrom(obj.DeepCopy())
			obj.Status = status
			Expect(c.Status().Patch(ctx, obj, patch)).To(Succeed())
		}
		setPolicies(refresh.DefaultPolicies())
	})

	It("previews a chrony change on every pool that renders it: Reboot without a file policy", func() {
		mc := write(workerMachineConfig("99-worker-chrony", chronyConfig(chronyB)))
		code, out, stderr := runLive("-f", mc)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Pool infra: 4 machines, 2 at a time, paused, from rendered-infra-1\nOutcome: Reboot"))
		Expect(out).To(ContainSubstring("Pool worker: 3 machines, 1 at a time, from rendered-worker-1\nOutcome: Reboot"))
		Expect(out).To(ContainSubstring("file  /etc/chrony.conf  Reboot    no file policy matches /etc/chrony.conf"))
		Expect(out).To(ContainSubstring("Note: The pool is paused: its nodes keep their config until it is unpaused"))
	})

	It("says InPlace with the policy's actions once the cluster has a policy for the file, in the file mode's JSON", func() {
		policies, err := refresh.MergePolicies(operatorv1.NodeDisruptionPolicyConfig{Files: []operatorv1.NodeDisruptionPolicySpecFile{{
			Path: "/etc/chrony.conf", Actions: []operatorv1.NodeDisruptionPolicySpecAction{{Type: operatorv1.RestartSpecAction, Restart: &operatorv1.RestartService{ServiceName: "chronyd.service"}}},
		}}})
		Expect(err).NotTo(HaveOccurred())
		setPolicies(policies)
		DeferCleanup(func() { setPolicies(refresh.DefaultPolicies()) })

		mc := write(workerMachineConfig("99-worker-chrony", chronyConfig(chronyB)))
		code, out, stderr := runLive("-f", mc, "--pool", "worker", "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(MatchJSON(`{
  "machineConfig": "99-worker-chrony",
  "operation": "apply",
  "pools": [{
    "pool": "worker", "renderedConfig": "rendered-worker-1", "paused": false, "machineCount": 3, "maxUnavailable": 1,
    "outcome": "InPlace",
    "actions": [{"type": "Restart", "unit": "chronyd.service"}],
    "changes": [{"kind": "file", "name": "/etc/chrony.conf", "decision": "InPlace", "rule": "file policy /etc/chrony.conf: Restart",
      "actions": [{"type": "Restart", "unit": "chronyd.service"}]}]
  }]
}`))

		p := livePlan("--delete", "99-worker-chrony", "--pool", "worker")
		Expect(p.Operation).To(Equal("delete"))
		Expect(p.Pools).To(ConsistOf(HaveField("Result", HaveField("Changes", ConsistOf(refresh.ChangeDecision{
			Kind: refresh.KindFile, Name: "/etc/chrony.conf", Decision: refresh.InPlace, Rule: "file policy /etc/chrony.conf: Restart",
			Actions: []refresh.Action{{Type: refresh.ActionRestart, Unit: "chronyd.service"}},
		})))))
	})

	It("says Reboot for a kernel argument", func() {
		mc := write(workerMachineConfig("99-worker-kargs", `{"ignition":{"version":"3.2.0"}}`, func(mc *mcfgv1.MachineConfig) {
			mc.Spec.KernelArguments = []string{"nosmt"}
		}))
		p := livePlan("-f", mc, "--pool", "worker")
		Expect(p.Pools).To(ConsistOf(HaveField("Result", Equal(refresh.Result{Outcome: refresh.Reboot, Actions: []refresh.Action{}, Changes: []refresh.ChangeDecision{
			{Kind: refresh.KindKernelArguments, Name: "nosmt", Decision: refresh.Reboot, Rule: "a kernelArguments change always reboots"},
		}}))))
	})

	It("says Reject for a FIPS flip, which the MCO refuses on a running pool", func() {
		mc := write(workerMachineConfig("99-worker-fips", `{"ignition":{"version":"3.2.0"}}`, func(mc *mcfgv1.MachineConfig) { mc.Spec.FIPS = true }))
		p := livePlan("-f", mc, "--pool", "worker")
		Expect(p.Pools).To(ConsistOf(HaveField("Result", And(
			HaveField("Outcome", refresh.Reject),
			HaveField("Changes", ConsistOf(And(HaveField("Kind", refresh.KindFIPS), HaveField("Decision", refresh.Reject)))),
		))))
	})

	It("says so when no pool selects the MachineConfig", func() {
		mc := workerMachineConfig("99-master-chrony", chronyConfig(chronyB))
		mc.Labels[render.RoleLabel] = "master"
		code, out, _ := runLive("-f", write(mc))
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("No MachineConfigPool selects MachineConfig 99-master-chrony (labels machineconfiguration.openshift.io/role=master): nothing changes"))
	})

	It("says when the pool's MachineConfigs already differ from its rendered config, and plans both changes", func() {
		pending := workerMachineConfig("99-worker-motd", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hi"}}]}}`)
		Expect(c.Create(ctx, pending)).To(Succeed())
		DeferCleanup(func() { Expect(c.Delete(ctx, pending)).To(Succeed()) })

		p := livePlan("-f", write(workerMachineConfig("99-worker-chrony", chronyConfig(chronyB))), "--pool", "worker")
		Expect(p.Pools).To(ConsistOf(And(
			HaveField("Result.Changes", ConsistOf(HaveField("Name", "/etc/chrony.conf"), HaveField("Name", "/etc/motd"))),
			HaveField("Notes", ConsistOf("The pool's MachineConfigs already differ from rendered-worker-1 before this change (file /etc/motd): the plan includes that")),
		)))
	})

	It("plans every document of a file together, as oc apply applies them", func() {
		chrony := write(workerMachineConfig("99-worker-chrony", chronyConfig(chronyB)))
		kargs := write(workerMachineConfig("99-worker-kargs", `{"ignition":{"version":"3.2.0"}}`, func(mc *mcfgv1.MachineConfig) {
			mc.Spec.KernelArguments = []string{"nosmt"}
		}))
		both := filepath.Join(dir, "both.yaml")
		Expect(os.WriteFile(both, []byte("# two changes\n---\n"+readFile(chrony)+"---\n"+readFile(kargs)), 0o600)).To(Succeed())
		p := livePlan("-f", both, "--pool", "worker")
		Expect(p.MachineConfig).To(Equal("99-worker-chrony, 99-worker-kargs"))
		Expect(p.Pools).To(ConsistOf(HaveField("Result", And(
			HaveField("Outcome", refresh.Reboot),
			HaveField("Changes", ConsistOf(HaveField("Name", "/etc/chrony.conf"), HaveField("Name", "nosmt"))),
		))))
	})

	It("reads -f - from stdin", func() {
		in := filepath.Join(dir, "stdin.yaml")
		Expect(os.WriteFile(in, []byte(readFile(write(workerMachineConfig("99-worker-chrony", chronyConfig(chronyB))))), 0o600)).To(Succeed())
		f, err := os.Open(in)
		Expect(err).NotTo(HaveOccurred())
		stdin := os.Stdin
		os.Stdin = f
		DeferCleanup(func() { os.Stdin = stdin; _ = f.Close() })
		p := livePlan("-f", "-", "--pool", "worker")
		Expect(p.MachineConfig).To(Equal("99-worker-chrony"))
		Expect(p.Pools).To(ConsistOf(HaveField("Result.Changes", ConsistOf(HaveField("Name", "/etc/chrony.conf")))))
	})

	It("exits 2 on a file that names a MachineConfig twice, or none", func() {
		chrony := readFile(write(workerMachineConfig("99-worker-chrony", chronyConfig(chronyB))))
		twice := filepath.Join(dir, "twice.yaml")
		Expect(os.WriteFile(twice, []byte(chrony+"---\n"+chrony), 0o600)).To(Succeed())
		code, _, stderr := runLive("-f", twice)
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring("MachineConfig 99-worker-chrony is in documents 1 and 2: give it once"))
		empty := filepath.Join(dir, "empty.yaml")
		Expect(os.WriteFile(empty, []byte("# nothing\n---\n"), 0o600)).To(Succeed())
		code, _, stderr = runLive("-f", empty)
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring("no MachineConfig in it"))
		bad := filepath.Join(dir, "bad.yaml")
		Expect(os.WriteFile(bad, []byte(chrony+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600)).To(Succeed())
		code, _, stderr = runLive("-f", bad)
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring("bad.yaml document 2: a ConfigMap, not a machineconfiguration.openshift.io/v1 MachineConfig"))
	})

	It("exits 2 naming an unknown pool or MachineConfig", func() {
		code, _, stderr := runLive("--delete", "99-worker-nope")
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring("MachineConfig 99-worker-nope not found"))
		code, _, stderr = runLive("--delete", "99-worker-ssh", "--pool", "gpu")
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring("MachineConfigPool gpu not found"))
	})
})

var _ = DescribeTable("bootimagectl refresh plan --kubeconfig exits 2 on a MachineConfig that does not parse, naming the field",
	func(content, message string) {
		dir := GinkgoT().TempDir()
		p := filepath.Join(dir, "mc.yaml")
		Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
		code, _, stderr := runCLI("refresh", "plan", "--kubeconfig", filepath.Join(dir, "none"), "-f", p)
		Expect(code).To(Equal(2))
		Expect(stderr).To(ContainSubstring(message))
	},
	Entry("a misspelt field", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 99-x}\nspec: {kernelArgs: [nosmt]}\n", `unknown field "spec.kernelArgs"`),
	Entry("a mistyped field", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 99-x}\nspec: {fips: maybe}\n", "spec.fips"),
	Entry("an unknown kernel type", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 99-x}\nspec: {kernelType: fast}\n", `MachineConfig 99-x spec.kernelType: "fast" is not one of`),
	Entry("invalid Ignition", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 99-x}\nspec: {config: {ignition: {version: 9.9.9}}}\n", "MachineConfig 99-x spec.config: invalid Ignition config"),
	Entry("another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "a ConfigMap, not a machineconfiguration.openshift.io/v1 MachineConfig"),
	Entry("no name", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nspec: {}\n", "metadata.name is empty"),
)

var _ = It("bootimagectl refresh plan --kubeconfig needs exactly one of -f and --delete", func() {
	code, _, stderr := runCLI("refresh", "plan", "--kubeconfig", "k", "-f", "a.yaml", "--delete", "b")
	Expect(code).To(Equal(2))
	Expect(stderr).To(ContainSubstring("give one of -f FILE and --delete NAME"))
})
