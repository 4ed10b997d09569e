// Package expect holds Gomega helpers for specs that call a reconciler directly, in the shape of
// karpenter's test/expectations: one Reconcile, its error checked, its result returned; and a
// client that counts the writes made through it.
package expect

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// ExpectReconcileSucceeded calls r.Reconcile once for key and expects it to return no error.
func ExpectReconcileSucceeded(ctx context.Context, r reconcile.Reconciler, key client.ObjectKey) reconcile.Result {
	ginkgo.GinkgoHelper()
	result, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "Reconcile of %s", key)
	return result
}

// AppliedPatch applies d's providerSpec patch to original and returns both, decoded.
func AppliedPatch(original string, d bootimage.Decision) (before, after map[string]any) {
	ginkgo.GinkgoHelper()
	ops, err := json.Marshal(d.ProviderSpecPatch)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	patch, err := jsonpatch.DecodePatch(ops)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	patched, err := patch.Apply([]byte(original))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(json.Unmarshal([]byte(original), &before)).To(gomega.Succeed())
	gomega.Expect(json.Unmarshal(patched, &after)).To(gomega.Succeed())
	return before, after
}

// Writes counts the writes sent through a client of CountingWrites, by verb and kind of object
// ("Patch MachineSet", "SubResourceUpdate status MachineConfiguration"), whether the API server
// took them or not.
type Writes struct {
	mu     sync.Mutex
	counts map[string]int
}

// CountingWrites returns c, wrapped so that every write it sends is counted in the Writes.
func CountingWrites(c client.WithWatch) (client.WithWatch, *Writes) {
	w := &Writes{counts: map[string]int{}}
	kind := func(obj client.Object) string {
		if gvk, err := c.GroupVersionKindFor(obj); err == nil {
			return gvk.Kind
		}
		return "?"
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("Create " + kind(obj))
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("Update " + kind(obj))
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("Patch " + kind(obj))
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("Delete " + kind(obj))
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			w.add("DeleteAllOf " + kind(obj))
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			w.add("SubResourceCreate " + sub + " " + kind(obj))
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add("SubResourceUpdate " + sub + " " + kind(obj))
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("SubResourcePatch " + sub + " " + kind(obj))
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			w.add("Apply " + applyKind(obj))
			return c.Apply(ctx, obj, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			w.add("SubResourceApply " + sub + " " + applyKind(obj))
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
	}), w
}

// applyKind is the kind an apply configuration sets, or its Go type when it sets none.
func applyKind(obj runtime.ApplyConfiguration) string {
	if k, ok := obj.(interface{ GetKind() *string }); ok && k.GetKind() != nil {
		return *k.GetKind()
	}
	return fmt.Sprintf("%T", obj)
}

func (w *Writes) add(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[what]++
}

// Counts returns the writes counted since the last Reset, by verb and kind.
func (w *Writes) Counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

// Reset forgets the writes counted so far.
func (w *Writes) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.counts)
}
