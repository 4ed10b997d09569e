// Package runbooks runs every shell command of docs/runbooks/*.md, as written, with oc (kubectl
// under that name), bootimagectl and jq against a real kube-apiserver on which the operator has
// restored a MachineSet after a machine failed on its new boot image and holds it there.
package runbooks_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// kubectlEnv names a kubectl to use instead of bin/k8s/kubectl, which hack/build-k8s.sh builds.
const kubectlEnv = "RUNBOOKS_KUBECTL"

// The seeded objects the runbooks' placeholders stand for.
const (
	machineSet = "worker-r"
	machine    = "worker-r-1"
)

// gcpImageNotFound is how the Machine API's GCP provider reports an instance insert that
// Compute Engine refused for its boot image.
const gcpImageNotFound = `error launching instance: googleapi: Error 400: Invalid value for field 'resource.disks[0].initializeParams.sourceImage': 'projects/rhcos-cloud/global/images/new'. The referenced image resource cannot be found., invalid`

var (
	env *testenv.Env
	ctx = context.Background()
	// shellEnv is the environment the runbook commands run in: PATH with oc and bootimagectl
	// first, KUBECONFIG at the test API server.
	shellEnv []string
	hasJQ    bool
)

func TestRunbooks(t *testing.T) {
	testenv.RunSpecs(t, "runbook commands work as written", testenv.Waits{Timeout: 60 * time.Second, Polling: 100 * time.Millisecond})
}

var _ = BeforeSuite(func() {
	testenv.LogToGinkgo(1)
	bin := GinkgoT().TempDir()
	Expect(os.Symlink(kubectl(), filepath.Join(bin, "oc"))).To(Succeed())
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "bootimagectl"), "./cmd/bootimagectl")
	build.Dir = manifests.RepoRoot()
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/bootimagectl: %s", out)
	_, err = exec.LookPath("jq")
	hasJQ = err == nil

	env = testenv.StartForSpecs(testenv.Options{CAPI: true})
	kubeconfig := filepath.Join(bin, "kubeconfig")
	Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
	shellEnv = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig, "HOME=" + bin}
	// An admin's current project is seldom where the objects or the Events are: a command that
	// needs a namespace must name it.
	code, stdout, stderr := shell("oc config set-context --current --namespace=openshift-config")
	Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	seedRestored()
})

// kubectl returns the kubectl the runbooks run as oc: $RUNBOOKS_KUBECTL, or bin/k8s/kubectl built
// from the pinned tools module when missing or stale.
func kubectl() string {
	GinkgoHelper()
	if path := os.Getenv(kubectlEnv); path != "" {
		return path
	}
	root := manifests.RepoRoot()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "build-k8s.sh"), "kubectl")
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Run()).To(Succeed(), "hack/build-k8s.sh kubectl")
	return filepath.Join(root, "bin", "k8s", "kubectl")
}

// seedRestored makes a GCP cluster whose MachineSet the operator updates, and then restores and
// holds after a machine failed on the new image, as BootImageRestored describes; and a Cluster
// API MachineSet of the same name for the history command of Cluster API objects.
func seedRestored() {
	GinkgoHelper()
	Expect(fixtures.Create(ctx, env.Client, append(fixtures.GCPCluster(), fixtures.MachineSet(machineSet, fixtures.GCPProviderSpec(fixtures.OldGCPImage)))...)).To(Succeed())
	Expect(fixtures.Create(ctx, env.Client, fixtures.ClusterAPIOwner("MachineSet", machineSet, machineSet))).To(Succeed())
	mgr, err := env.StartOperator(controllers.Options{ClusterOperator: "machine-config"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mgr.Stop)
	Eventually(gcpImage).Should(Equal(fixtures.NewGCPImage))

	m := fixtures.Machine(machine, machineSet, string(getMachineSet().Spec.Template.Spec.ProviderSpec.Value.Raw))
	Expect(env.Client.Create(ctx, m)).To(Succeed())
	phase, message := "Failed", gcpImageNotFound
	m.Status = machinev1beta1.MachineStatus{Phase: &phase, ErrorMessage: &message}
	Expect(env.Client.Status().Update(ctx, m)).To(Succeed())
	Eventually(gcpImage).Should(Equal(fixtures.OldGCPImage))
	Eventually(func() map[string]string { return getMachineSet().Annotations }).Should(HaveKey(bootimage.HoldAnnotation))
}

func getMachineSet() *machinev1beta1.MachineSet {
	GinkgoHelper()
	ms := &machinev1beta1.MachineSet{}
	Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: fixtures.MachineAPINamespace, Name: machineSet}, ms)).To(Succeed())
	return ms
}

func gcpImage() any {
	var ps map[string]any
	Expect(json.Unmarshal(getMachineSet().Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
	return ps["disks"].([]any)[0].(map[string]any)["image"]
}
