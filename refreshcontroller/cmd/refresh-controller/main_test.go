package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/pool"
	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
)

const example = "../../testdata/example"

// TestTryIt follows the README's "Trying it" with one envtest cluster as management and guest:
// the example NodePool is adopted, then a pull-secret rotation is refreshed by the simulated daemon.
func TestTryIt(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs(filepath.Join("..", "..", "..", "bin", "k8s"))
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: append([]string{"../../testdata/nodepool-crd.yaml"}, capiCRDs(t)...)}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting kube-apiserver and etcd from %s (`make k8s` builds them)", assets)
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	g.Expect(err).NotTo(HaveOccurred())
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(os.WriteFile(kubeconfigPath, kubeconfig, 0o600)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	apply(g, c, "nodepool.yaml")
	apply(g, c, "nodes.yaml")
	for _, n := range []string{"demo-0", "demo-1", "demo-2"} {
		node := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: n}, node)).To(Succeed())
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
		g.Expect(c.Status().Update(ctx, node)).To(Succeed())
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-demo", Name: "token-demo-0a0a0a0a"},
		Data: map[string][]byte{hypershift.TokenSecretPayloadKey: encoded(g, "served-v1.json"), controller.TokenSecretRefreshConfigKey: []byte("p1")}}
	g.Expect(c.Create(ctx, token)).To(Succeed())

	root := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{managementKubeconfig: kubeconfigPath, guestKubeconfig: kubeconfigPath, namespace: "clusters-demo",
			daemonImage: "example", simulateDaemon: true, daemonRoot: root, metricsAddress: "0"},
			// What the binary logs, shown with -v: the try-it path says what happens.
			funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{}))
	}()
	refreshed := func(payloadHash string) func(Gomega) {
		return func(g Gomega) {
			for _, n := range []string{"demo-0", "demo-1", "demo-2"} {
				node := &corev1.Node{}
				g.Expect(c.Get(ctx, client.ObjectKey{Name: n}, node)).To(Succeed())
				g.Expect(node.Annotations).To(HaveKeyWithValue(pool.CurrentRefreshConfigAnnotation, payloadHash), n)
			}
			np := &unstructured.Unstructured{}
			np.SetGroupVersionKind(controller.NodePoolGVK)
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "clusters-demo", Name: "demo"}, np)).To(Succeed())
			conditions, _, _ := unstructured.NestedSlice(np.Object, "status", "conditions")
			g.Expect(conditions).To(ContainElement(And(HaveKeyWithValue("type", pool.ConditionComplete), HaveKeyWithValue("status", "True"))))
		}
	}
	g.Eventually(refreshed("p1")).Should(Succeed(), "adoption")

	// The rotation: the token Secret carries served-v2.json, and the payload hash moves.
	token.Data[hypershift.TokenSecretPayloadKey] = encoded(g, "served-v2.json")
	token.Data[controller.TokenSecretRefreshConfigKey] = []byte("p2")
	g.Expect(c.Update(ctx, token)).To(Succeed())
	np := &unstructured.Unstructured{}
	np.SetGroupVersionKind(controller.NodePoolGVK)
	np.SetNamespace("clusters-demo")
	np.SetName("demo")
	g.Expect(c.Patch(ctx, np, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"hypershift.openshift.io/nodePoolTargetRefreshConfig":"p2"}}}`)))).To(Succeed())
	g.Eventually(refreshed("p2")).Should(Succeed(), "the pull-secret rotation")
	g.Expect(os.ReadFile(filepath.Join(root, "demo-0", "var/lib/kubelet/config.json"))).To(ContainSubstring("djI="))

	cancel()
	g.Eventually(done).Should(Receive(Not(HaveOccurred())))
}

// apply creates every object of a YAML file of the example.
func apply(g *WithT, c client.Client, name string) {
	data, err := os.ReadFile(filepath.Join(example, name))
	g.Expect(err).NotTo(HaveOccurred())
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(doc, &u.Object)).To(Succeed())
		if len(u.Object) == 0 {
			continue
		}
		g.Expect(c.Create(context.Background(), u)).To(Succeed(), "%s: %s", name, u.GetName())
	}
}

func encoded(g *WithT, name string) []byte {
	served, err := os.ReadFile(filepath.Join(example, name))
	g.Expect(err).NotTo(HaveOccurred())
	s, err := hypershift.EncodePayload(served)
	g.Expect(err).NotTo(HaveOccurred())
	return []byte(s)
}

// capiCRDs are the MachineDeployment, MachineSet and Machine CRDs of the cluster-api version
// hack/tools/capi-crds pins, from the Go module cache.
func capiCRDs(t *testing.T) []string {
	tools := filepath.Join("..", "..", "..", "hack", "tools", "capi-crds")
	out, err := exec.Command("go", "-C", tools, "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatalf("reading the cluster-api version %s pins: %v", tools, err)
	}
	out, err = exec.Command("go", "-C", tools, "mod", "download", "-json", "sigs.k8s.io/cluster-api@"+string(bytes.TrimSpace(out))).Output()
	if err != nil {
		t.Fatalf("downloading sigs.k8s.io/cluster-api: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	bases := filepath.Join(mod.Dir, "config", "crd", "bases")
	return []string{filepath.Join(bases, "cluster.x-k8s.io_machinedeployments.yaml"), filepath.Join(bases, "cluster.x-k8s.io_machinesets.yaml"),
		filepath.Join(bases, "cluster.x-k8s.io_machines.yaml")}
}
