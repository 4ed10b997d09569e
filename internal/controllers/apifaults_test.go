package controllers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// startOperatorThrough starts the operator with its API requests sent through wrap.
func startOperatorThrough(wrap func(next http.RoundTripper) http.RoundTripper) *testenv.Manager {
	GinkgoHelper()
	through := *env
	through.Config = rest.CopyConfig(env.Config)
	through.Config.Wrap(wrap)
	mgr, err := through.StartOperator(controllers.Options{ReleaseVersion: fixtures.ReleaseVersion})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mgr.Stop)
	return mgr
}

// beforeFirstPatchOf runs do once, just before the operator's first patch of MachineSet name
// reaches the API server: after the operator read the object, before its write lands.
func beforeFirstPatchOf(name string, do func()) func(http.RoundTripper) http.RoundTripper {
	var once sync.Once
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/machinesets/"+name) {
				once.Do(do)
			}
			return next.RoundTrip(req)
		})
	}
}

// customGCPImage is a user's own image, which the operator leaves alone.
const customGCPImage = "projects/my-project/global/images/golden-rhcos"

func gcpImage(name string) func() any {
	return func() any { return providerSpec(name)["disks"].([]any)[0].(map[string]any)["image"] }
}

var _ = Describe("API faults during a write", func() {
	It("keeps a user's edit landing between the operator's read and its write, and writes once more", func() {
		bootImageCluster(configv1.GCPPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("edited", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		writes := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		startOperatorThrough(beforeFirstPatchOf("edited", func() {
			edit := []byte(`{"metadata":{"labels":{"team":"payments"}},"spec":{"replicas":3}}`)
			Expect(k8s.Patch(ctx, getMachineSet("edited"), client.RawPatch(types.MergePatchType, edit))).To(Succeed())
		}))

		Eventually(gcpImage("edited")).Should(Equal(fixtures.NewGCPImage))
		ms := getMachineSet("edited")
		Expect(ms.Labels).To(HaveKeyWithValue("team", "payments"), "the user's edit is kept")
		Expect(*ms.Spec.Replicas).To(BeEquivalentTo(3))
		customImageBarrier("edited")
		Expect(writes.counts()["edited"]).To(Equal(3), "the user's write, one of the operator's and the barrier's")
	})

	It("never writes a boot image the user replaced between the operator's read and its write", func() {
		bootImageCluster(configv1.GCPPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("replaced", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		writes := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		startOperatorThrough(beforeFirstPatchOf("replaced", func() {
			ms := getMachineSet("replaced")
			ms.Spec.Template.Spec.ProviderSpec.Value.Raw = []byte(fixtures.GCPProviderSpec(customGCPImage))
			Expect(k8s.Update(ctx, ms)).To(Succeed())
		}))

		Eventually(machineSetEvents("replaced")).Should(ContainElement(ContainSubstring("CustomImage")))
		Expect(gcpImage("replaced")()).To(Equal(customGCPImage), "the user's image is kept")
		customImageBarrier("replaced")
		Expect(writes.counts()["replaced"]).To(Equal(2), "the user's write and the barrier's only")
	})

	It("never writes to an object recreated under the same name between the read and the write what it decided for the old one", func() {
		bootImageCluster(configv1.GCPPlatformType)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("recreated", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		oldUID := getMachineSet("recreated").UID
		writes := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		startOperatorThrough(beforeFirstPatchOf("recreated", func() {
			Expect(k8s.Delete(ctx, getMachineSet("recreated"))).To(Succeed())
			Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet("recreated", fixtures.GCPProviderSpec(customGCPImage)))).To(Succeed())
		}))

		Eventually(machineSetEvents("recreated")).Should(ContainElement(ContainSubstring("CustomImage")))
		Expect(getMachineSet("recreated").UID).NotTo(Equal(oldUID))
		Expect(gcpImage("recreated")()).To(Equal(customGCPImage))
		customImageBarrier("recreated")
		Expect(writes.counts()["recreated"]).To(Equal(1), "no write to the new object but the barrier's")
	})

	It("converges through 429s with Retry-After, a quarter of requests and a burst of all of them, writing each MachineSet once", func() {
		bootImageCluster(configv1.GCPPlatformType)
		names := oldGCPMachineSets("throttled", 20)
		writes := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		var sent, refused atomic.Int64
		var burstUntil atomic.Pointer[time.Time]
		startOperatorThrough(func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				n := sent.Add(1)
				until := burstUntil.Load()
				if n%4 == 0 || (until != nil && time.Now().Before(*until)) {
					refused.Add(1)
					if req.Body != nil {
						_, _ = io.Copy(io.Discard, req.Body)
						_ = req.Body.Close()
					}
					body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","code":429}`
					return &http.Response{StatusCode: http.StatusTooManyRequests, Status: "429 Too Many Requests", Request: req,
						Header: http.Header{"Retry-After": {"1"}, "Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
				}
				return next.RoundTrip(req)
			})
		})
		// A burst in the middle of the wave: every request refused for 3s.
		Eventually(func() int { return len(writes.counts()) }).Should(BeNumerically(">", 0))
		until := time.Now().Add(3 * time.Second)
		burstUntil.Store(&until)

		for _, name := range names {
			Eventually(gcpImage(name), "60s").Should(Equal(fixtures.NewGCPImage))
		}
		customImageBarrier(names...)
		Expect(writes.total()).To(Equal(2*len(names)), "one write per MachineSet, no double write (and one barrier write each)")
		Expect(refused.Load()).To(BeNumerically(">", 0))
		GinkgoWriter.Printf("429s: %d of %d requests refused\n", refused.Load(), sent.Load())
	})

	It("writes each MachineSet once through a slow proxy that loses the answers of some writes", func() {
		bootImageCluster(configv1.GCPPlatformType)
		names := oldGCPMachineSets("proxied", 20)
		writes := watchWrites(&machinev1beta1.MachineSetList{}, fixtures.MachineAPINamespace)
		var patches, lost atomic.Int64
		startOperatorThrough(func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Method == http.MethodGet {
					// The proxy's latency, not synchronisation; a cancelled request stops waiting.
					select {
					case <-time.After(time.Duration(200+rand.IntN(300)) * time.Millisecond):
					case <-req.Context().Done():
						return nil, req.Context().Err()
					}
				}
				resp, err := next.RoundTrip(req)
				// Every third MachineSet patch reaches the API server, but its answer is lost.
				if err == nil && req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/machinesets/") && patches.Add(1)%3 == 0 {
					lost.Add(1)
					_ = resp.Body.Close()
					return nil, syscall.ECONNRESET
				}
				return resp, err
			})
		})

		for _, name := range names {
			Eventually(gcpImage(name), "60s").Should(Equal(fixtures.NewGCPImage))
		}
		customImageBarrier(names...)
		Expect(writes.total()).To(Equal(2*len(names)), "one write per MachineSet: a lost answer is not written twice (and one barrier write each)")
		Expect(lost.Load()).To(BeNumerically(">", 0))
	})
})

// oldGCPMachineSets creates n MachineSets on an old RHCOS image, named prefix-00 on, and returns
// their names.
func oldGCPMachineSets(prefix string, n int) []string {
	GinkgoHelper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		Expect(fixtures.Create(ctx, k8s, fixtures.MachineSet(name, fixtures.GCPProviderSpec(fixtures.OldGCPImage)))).To(Succeed())
		names = append(names, name)
	}
	return names
}

// customImageBarrier closes a "no more writes" window on the GCP MachineSets names: it points each
// at a custom image of its own (one write each, the caller's) and waits for the operator's
// CustomImage Event naming that image. Sound under concurrent reconciles of different keys: the
// Event comes from a reconcile of that MachineSet that read the barrier's write, which its watch
// delivers after every earlier change of it, and reconciles of one key are serialized, so every
// reconcile of it that an earlier change (or the operator's own write) started has finished.
func customImageBarrier(names ...string) {
	GinkgoHelper()
	for _, name := range names {
		image := "projects/my-project/global/images/barrier-" + name
		Eventually(func() error {
			ms := getMachineSet(name)
			var ps map[string]any
			if err := json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps); err != nil {
				return err
			}
			ps["disks"].([]any)[0].(map[string]any)["image"] = image
			raw, err := json.Marshal(ps)
			if err != nil {
				return err
			}
			ms.Spec.Template.Spec.ProviderSpec.Value.Raw = raw
			return k8s.Update(ctx, ms)
		}).Should(Succeed(), "the barrier's write of %s", name)
	}
	for _, name := range names {
		Eventually(machineSetEvents(name)).Should(ContainElement(And(HavePrefix(bootimage.ReasonCustomImage+": "), ContainSubstring("barrier-"+name+" "))),
			"the operator decided %s on the barrier's image", name)
	}
}
