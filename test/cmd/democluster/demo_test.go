package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func TestDemo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Demo")
}

// The README's tutorial and "Things to try", step by step, on the demo `make run` starts, with the
// operator binary as `make run` runs it. In every state, `bootimagectl plan`, run as the tutorial
// runs it, must decide what the operator decided: the operator's decisions are read from its
// bootimage_decisions metric (counted from the decisions its conditions are computed from) and
// its BootImageUpdateDegraded condition.
// Ordered: the specs are the README's tutorial steps on one demo cluster, in its order; each
// starts from the state the one before left (a stream broken then mended, a MachineSet opted out).
var _ = Describe("The demo's tutorial", Ordered, func() {
	const (
		worker1a = "demo-x7k2p-worker-us-east-1a"
		worker1b = "demo-x7k2p-worker-us-east-1b"
		worker2a = "demo-x7k2p-worker-us-west-2a"
		custom   = "demo-x7k2p-custom-us-east-1c"
		rhel10   = rhel10Name
		cpms     = "cluster"
		nextAMI  = "ami-0b0b0b0b0b0b0b0b1"
		deadAMI  = "ami-0deadbeefdeadbeef"
	)
	var (
		ctx                         = context.Background()
		d                           *demo
		demoDir                     string
		bin, metricsAddr, token     string
		servingCA                   []byte
		savedStream                 *corev1.ConfigMap
		noChange, skipCustom        = "NoChange UpToDate", "Skip CustomImage"
		unavailable, unavailableErr = "Skip TargetImageUnavailable", "Error TargetImageUnavailable"
	)

	BeforeAll(func() {
		out = GinkgoWriter
		bin = GinkgoT().TempDir()
		build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/bootimage-operator", "./cmd/bootimagectl")
		build.Dir = manifests.RepoRoot()
		output, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", output)

		demoDir = GinkgoT().TempDir()
		d, err = start(ctx, demoDir)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(d.stop)

		// A scraper allowed to get /metrics, as Prometheus is on a cluster.
		c := d.env.Client
		scraper := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "scraper"}}
		Expect(c.Create(ctx, scraper)).To(Succeed())
		Expect(c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}})).To(Succeed())
		Expect(c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "scraper"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "scraper"}}})).To(Succeed())
		token, err = d.env.ServiceAccountToken(ctx, "default", "scraper")
		Expect(err).NotTo(HaveOccurred())
		certDir := GinkgoT().TempDir()
		servingCA, err = testenv.ServingCert(certDir)
		Expect(err).NotTo(HaveOccurred())

		metricsAddr = freeAddress()
		runCtx, cancel := context.WithCancel(ctx)
		operator := d.operator(runCtx, filepath.Join(bin, "bootimage-operator"),
			"--metrics-bind-address", metricsAddr, "--metrics-cert-dir", certDir, "--health-probe-bind-address", "0")
		operator.Stdout, operator.Stderr = GinkgoWriter, GinkgoWriter
		operator.Cancel = func() error { return operator.Process.Signal(os.Interrupt) }
		Expect(operator.Start()).To(Succeed())
		DeferCleanup(func() {
			cancel()
			_ = operator.Wait()
		})
	})

	// plan runs bootimagectl plan -o json as the tutorial's second terminal does, with args.
	plan := func(args ...string) ([]bootimage.Decision, int, error) {
		cmd := exec.Command(filepath.Join(bin, "bootimagectl"), append([]string{"plan", "-o", "json"}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+d.kubeconfig, "SSL_CERT_FILE="+d.caBundle, "RELEASE_VERSION=")
		stdout, err := cmd.Output()
		code := 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code, err = exit.ExitCode(), nil
		}
		var p struct{ Items []bootimage.Decision }
		if err == nil {
			err = json.Unmarshal(stdout, &p)
		}
		return p.Items, code, err
	}

	// agree checks, once, that the plan decides what the operator has decided, and as want says
	// (name: "Action Reason") for the objects it names.
	agree := func(g Gomega, want map[string]string, planArgs ...string) {
		mc := &operatorv1.MachineConfiguration{}
		g.Expect(d.env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		progressing := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateProgressing)
		g.Expect(progressing).NotTo(BeNil())
		g.Expect(progressing.Status).To(Equal(metav1.ConditionFalse), "the operator has decided every object")
		degraded := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateDegraded)
		g.Expect(degraded).NotTo(BeNil())

		scraped, err := testenv.Scrape(metricsAddr, servingCA, token)
		g.Expect(err).NotTo(HaveOccurred())
		operatorCounts := map[string]float64{}
		for _, m := range scraped.Families["bootimage_decisions"].GetMetric() {
			if l := testenv.Labels(m); m.GetGauge().GetValue() > 0 {
				operatorCounts[l["kind"]+" "+l["action"]+" "+l["reason"]] += m.GetGauge().GetValue()
			}
		}

		items, code, err := plan(planArgs...)
		g.Expect(err).NotTo(HaveOccurred())
		planCounts, got := map[string]float64{}, map[string]string{}
		for _, it := range items {
			planCounts[it.Kind+" "+string(it.Action)+" "+it.Reason]++
			got[it.Name] = string(it.Action) + " " + it.Reason
			named := strings.Contains(degraded.Message, it.Kind+" "+it.Namespace+"/"+it.Name+": "+it.Reason)
			g.Expect(named).To(Equal(it.Action == bootimage.Error && !it.ClusterLevel()),
				"%s %s is %s %s in the plan; BootImageUpdateDegraded: %s", it.Kind, it.Name, it.Action, it.Reason, degraded.Message)
		}
		g.Expect(planCounts).To(Equal(operatorCounts), "the plan's decisions (kind action reason: count) and the operator's")
		g.Expect(code == 1).To(Equal(degraded.Status == metav1.ConditionTrue), "plan exits 1 exactly while the operator is degraded: %s", degraded.Message)
		for name, w := range want {
			g.Expect(got).To(HaveKeyWithValue(name, w))
		}
	}
	expectAgreement := func(want map[string]string, planArgs ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) { agree(g, want, planArgs...) }).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}
	mergePatch := func(obj client.Object, patch string) {
		GinkgoHelper()
		Expect(d.env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	}
	machineConfiguration := &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	stream := func() *corev1.ConfigMap {
		GinkgoHelper()
		cm := &corev1.ConfigMap{}
		Expect(d.env.Client.Get(ctx, client.ObjectKey{Namespace: "openshift-machine-config-operator", Name: "coreos-bootimages"}, cm)).To(Succeed())
		return cm
	}
	// machineSet names MachineSet name, for a patch.
	machineSet := func(name string) *unstructured.Unstructured {
		ms := &unstructured.Unstructured{}
		ms.SetAPIVersion("machine.openshift.io/v1beta1")
		ms.SetKind("MachineSet")
		ms.SetNamespace(fixtures.MachineAPINamespace)
		ms.SetName(name)
		return ms
	}
	replaceAMI := func(from, to string) {
		GinkgoHelper()
		cm := stream()
		// As the tutorial's sed: the whole ConfigMap, so `stream` and the rhel-9 entry of `streams`.
		for k, v := range cm.Data {
			cm.Data[k] = strings.ReplaceAll(v, from, to)
		}
		Expect(d.env.Client.Update(ctx, cm)).To(Succeed())
	}
	mendStream := func() {
		GinkgoHelper()
		cm := stream()
		cm.Data = savedStream.Data
		Expect(d.env.Client.Update(ctx, cm)).To(Succeed())
	}

	It("updates the three worker MachineSets, the rhel-10 one from its own stream, and the CPMS, and leaves the custom one alone", func() {
		expectAgreement(map[string]string{worker1a: noChange, worker1b: noChange, worker2a: noChange, custom: skipCustom, cpms: noChange, rhel10: noChange})
		items, _, err := plan()
		Expect(err).NotTo(HaveOccurred())
		Expect(items).To(ContainElement(And(HaveField("Name", rhel10), HaveField("Stream", "rhel-10"), HaveField("Current", fixtures.RHEL10AWSAMIUSEast1))))
		savedStream = stream()
	})

	It("7. makes the installer's AMI copy anew in a region the stream lacks, and boots it by id", func() {
		Eventually(d.ec2.CopyRequests).Should(HaveLen(1))
		made := d.ec2.CopyRequests()[0]
		Expect(made).To(And(HaveField("Region", copyRegion), HaveField("SourceImageID", fixtures.RHEL10AWSAMIUSEast1)))
		Eventually(func() any {
			ms := &machinev1beta1.MachineSet{}
			Expect(d.env.Client.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: copyName}, ms)).To(Succeed())
			return amiOf(ms.Spec.Template.Spec.ProviderSpec.Value)
		}).WithTimeout(time.Minute).Should(Equal(made.ImageID))
		expectAgreement(map[string]string{copyName: noChange})
		events := &corev1.EventList{}
		Expect(d.env.Client.List(ctx, events, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(HaveField("Reason", "CopyingImage"), HaveField("InvolvedObject.Name", copyName))))
	})

	It("refuses a second demo over the running one, leaving its kubeconfig alone, and has help", func() {
		before, err := os.ReadFile(d.kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		_, err = start(ctx, demoDir)
		Expect(err).To(MatchError(ContainSubstring("a demo is already running (process " + strconv.Itoa(os.Getpid()))))
		Expect(os.ReadFile(d.kubeconfig)).To(Equal(before))
		for _, args := range [][]string{{"--help"}, {"-h"}} {
			help, _ := parseArgs(args)
			Expect(help).To(BeTrue(), "%v", args)
		}
		help, err := parseArgs([]string{"now"})
		Expect(help).To(BeFalse())
		Expect(err).To(MatchError(`unexpected argument "now"`))
	})

	It("1. opts a MachineSet out, by label, once skew enforcement is Manual", func() {
		mergePatch(machineConfiguration, `{"spec":{"bootImageSkewEnforcement":{"mode":"Manual","manual":{"mode":"OCPVersion","ocpVersion":"4.20.0"}}}}`)
		Eventually(func() operatorv1.BootImageSkewEnforcementModeStatus {
			Expect(d.env.Client.Get(ctx, client.ObjectKeyFromObject(machineConfiguration), machineConfiguration)).To(Succeed())
			return machineConfiguration.Status.BootImageSkewEnforcementStatus.Mode
		}).Should(Equal(operatorv1.BootImageSkewEnforcementModeStatusManual))
		ms := machineSet(worker2a)
		mergePatch(ms, `{"metadata":{"labels":{"bootimage.example.com/skip":"true"}}}`)
		mergePatch(&operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, `{"spec":{"managedBootImages":{"machineManagers":[
			{"resource":"controlplanemachinesets","apiGroup":"machine.openshift.io","selection":{"mode":"All"}},
			{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchExpressions":[{"key":"bootimage.example.com/skip","operator":"DoesNotExist"}]}}}}]}}}`)
		expectAgreement(map[string]string{worker2a: "Skip NotSelected", worker1a: noChange, worker1b: noChange, cpms: noChange})
	})

	It("2. breaks the stream, and mends it", func() {
		mergePatch(stream(), `{"data":{"streams":"{not json"}}`)
		expectAgreement(map[string]string{worker1a: "Error InvalidStream", custom: "Error InvalidStream", cpms: "Error InvalidStream"})
		mendStream()
		expectAgreement(map[string]string{worker1a: noChange, worker2a: "Skip NotSelected", custom: skipCustom, cpms: noChange})
	})

	It("3. leaves a MachineSet pointed at a custom image alone", func() {
		ms := machineSet(worker1b)
		Expect(d.env.Client.Patch(ctx, ms, client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"replace","path":"/spec/template/spec/providerSpec/value/ami/id","value":"`+fixtures.CustomAMI+`"}]`)))).To(Succeed())
		expectAgreement(map[string]string{worker1b: skipCustom, worker1a: noChange})
	})

	It("4. rolls the stream to a newer AMI", func() {
		replaceAMI(fixtures.NewAWSAMIUSEast1, nextAMI)
		expectAgreement(map[string]string{worker1a: noChange, cpms: noChange, worker1b: skipCustom, worker2a: "Skip NotSelected"})
		items, _, err := plan()
		Expect(err).NotTo(HaveOccurred())
		Expect(items).To(ContainElement(And(HaveField("Name", worker1a), HaveField("Current", nextAMI))), "updated, not only planned")
	})

	It("4. rolls the stream to an AMI EC2 lacks: Skip within the cloud grace period, Error after it", func() {
		replaceAMI(nextAMI, deadAMI)
		expectAgreement(map[string]string{worker1a: unavailable, cpms: unavailable})
		// Past the grace period (3 minutes of the operator's own clock).
		Eventually(func(g Gomega) {
			agree(g, map[string]string{worker1a: unavailableErr, cpms: unavailableErr})
		}).WithTimeout(bootimage.CloudErrorGrace + 2*time.Minute).WithPolling(5 * time.Second).Should(Succeed())
		mendStream()
		expectAgreement(map[string]string{worker1a: noChange, cpms: noChange})
	})

	It("6. labels a MachineSet with an OS stream the ConfigMap lacks: skipped, never given another stream's image", func() {
		ms := machineSet(rhel10)
		mergePatch(ms, `{"metadata":{"labels":{"machineconfiguration.openshift.io/osstream":"rhel-11"}}}`)
		expectAgreement(map[string]string{rhel10: "Skip OSStreamNotInBootImages"})
		items, _, err := plan()
		Expect(err).NotTo(HaveOccurred())
		Expect(items).To(ContainElement(And(HaveField("Name", rhel10), HaveField("Current", fixtures.RHEL10AWSAMIUSEast1),
			HaveField("Message", ContainSubstring("names OS stream rhel-11, which coreos-bootimages key streams does not carry (it has rhel-10, rhel-9)")))))
		mergePatch(ms, `{"metadata":{"labels":{"machineconfiguration.openshift.io/osstream":"rhel-10"}}}`)
		expectAgreement(map[string]string{rhel10: noChange})
	})

	It("runs on without ClusterVersion, the release version given as to the operator", func() {
		Expect(d.env.Client.Delete(ctx, &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"}})).To(Succeed())
		expectAgreement(map[string]string{worker1a: noChange, cpms: noChange, custom: skipCustom}, "--release-version", fixtures.ReleaseVersion)
		mc := &operatorv1.MachineConfiguration{}
		Expect(d.env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
		Expect(meta.IsStatusConditionTrue(mc.Status.Conditions, status.ConditionBootImageUpdateDegraded)).To(BeTrue(), "ClusterVersion missing degrades")

		By("rolling the stream meanwhile: the operator keeps updating, and the plan says so")
		replaceAMI(fixtures.NewAWSAMIUSEast1, nextAMI)
		expectAgreement(map[string]string{worker1a: noChange, cpms: noChange}, "--release-version", fixtures.ReleaseVersion)
		items, _, err := plan("--release-version", fixtures.ReleaseVersion)
		Expect(err).NotTo(HaveOccurred())
		Expect(items).To(ContainElement(And(HaveField("Name", worker1a), HaveField("Current", nextAMI))), "updated, not only planned")
	})
})

// freeAddress returns a local address nothing listens on.
func freeAddress() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}
