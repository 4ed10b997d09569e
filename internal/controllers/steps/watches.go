package steps

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// credentialsSecrets are the Secrets of openshift-machine-api a cloud catalogue reads: a change
// can change any decision.
var credentialsSecrets = func() map[string]bool {
	secrets := map[string]bool{}
	for _, p := range bootimage.Platforms() {
		if s := p.Traits().Credentials.Secret; s != "" {
			secrets[s] = true
		}
	}
	// The operator's own AWS credentials, which make AMI copies.
	secrets[aws.CopyCredentialsSecret] = true
	return secrets
}()

// WatchClusterInputs adds the cluster-wide inputs of a decision to b. A change is mapped by all
// (every object of the reconciler) only when it changes what a decision reads, so that unrelated
// writes (status of other fields, resyncs, other Secrets) do not re-decide a thousand objects.
// namespace holds the coreos-bootimages ConfigMap; byUserData maps a user-data Secret to the objects that name it.
func WatchClusterInputs(b *builder.TypedBuilder[reconcile.Request], namespace string, allObjects, byUserData handler.MapFunc) *builder.TypedBuilder[reconcile.Request] {
	all := handler.EnqueueRequestsFromMapFunc(allObjects)
	secrets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		if credentialsSecrets[o.GetName()] {
			return allObjects(ctx, o)
		}
		return byUserData(ctx, o)
	})
	return b.
		Watches(&operatorv1.MachineConfiguration{}, all, builder.WithPredicates(Named("", kube.MachineConfigurationName), selectionChanged())).
		Watches(&configv1.Infrastructure{}, all, builder.WithPredicates(Changed(func(o, n *configv1.Infrastructure) bool { return equality.Semantic.DeepEqual(o.Status, n.Status) }))).
		Watches(&configv1.FeatureGate{}, all, builder.WithPredicates(Changed(func(o, n *configv1.FeatureGate) bool { return equality.Semantic.DeepEqual(o.Status, n.Status) }))).
		Watches(&configv1.ClusterVersion{}, all, builder.WithPredicates(ClusterVersionChanged())).
		Watches(&corev1.ConfigMap{}, all, builder.WithPredicates(Named(namespace, kube.BootImagesConfigMapName), Changed(func(o, n *corev1.ConfigMap) bool { return equality.Semantic.DeepEqual(o.Data, n.Data) }))).
		Watches(&corev1.Secret{}, secrets, builder.WithPredicates(InNamespace(kube.MachineAPINamespace), Changed(func(o, n *corev1.Secret) bool { return equality.Semantic.DeepEqual(o.Data, n.Data) })))
}

// The kinds that choose the OS stream of an unlabelled object, watched where the API serves them
// (crdgate.Watch): a watch of a kind not served would never sync, and stop its controller.
var (
	machineConfigPools = crdgate.Optional{GroupVersion: mcfgv1.GroupVersion, Resource: "machineconfigpools", Kind: "MachineConfigPool",
		Without: "no pool chooses an OS stream: unlabelled objects take the cluster default"}
	// Served from 5.0 on: its absence before is normal, and not said.
	osImageStreams = crdgate.Optional{GroupVersion: mcfgv1.GroupVersion, Resource: "osimagestreams", Kind: "OSImageStream"}
)

// WatchOSStreams adds to b what chooses the OS stream of an unlabelled object, mapped by all: a
// MachineConfigPool's spec.osImageStream and OSImageStream cluster's default stream, each while
// the API serves it.
func WatchOSStreams(b *builder.TypedBuilder[reconcile.Request], mgr ctrl.Manager, allObjects handler.MapFunc) *builder.TypedBuilder[reconcile.Request] {
	all := handler.EnqueueRequestsFromMapFunc(allObjects)
	if crdgate.Watch(mgr, machineConfigPools) {
		b = b.Watches(&mcfgv1.MachineConfigPool{}, all, builder.WithPredicates(Changed(func(o, n *mcfgv1.MachineConfigPool) bool {
			return o.Spec.OSImageStream == n.Spec.OSImageStream
		})))
	}
	if !crdgate.Watch(mgr, osImageStreams) {
		return b
	}
	return b.Watches(&mcfgv1.OSImageStream{}, all, builder.WithPredicates(Named("", kube.OSImageStreamName), Changed(func(o, n *mcfgv1.OSImageStream) bool {
		return o.Status.DefaultStream == n.Status.DefaultStream
	})))
}

// InNamespace passes the objects of namespace ns.
func InNamespace(ns string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
}

// Named passes the one object ns/name (ns empty for a cluster-scoped one).
func Named(ns, name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns && o.GetName() == name })
}

// Changed passes creates and deletes, and updates for which same reports a difference in what
// decisions read.
func Changed[T client.Object](same func(old, cur T) bool) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(T)
		cur, okNew := e.ObjectNew.(T)
		return !okOld || !okNew || !same(old, cur)
	}}
}

// selectionChanged passes MachineConfiguration updates that change what is selected, or that
// make its status current (decisions wait for that), not the conditions written on it.
func selectionChanged() predicate.Predicate {
	return Changed(func(o, n *operatorv1.MachineConfiguration) bool {
		return o.Status.ObservedGeneration == n.Status.ObservedGeneration &&
			equality.Semantic.DeepEqual(o.Status.ManagedBootImagesStatus, n.Status.ManagedBootImagesStatus)
	})
}

// ClusterVersionChanged passes ClusterVersion updates of what decisions read: the history (is the
// cluster updating, what was installed) and the desired release (its architecture).
func ClusterVersionChanged() predicate.Predicate {
	return Changed(func(o, n *configv1.ClusterVersion) bool {
		return equality.Semantic.DeepEqual(o.Status.History, n.Status.History) && equality.Semantic.DeepEqual(o.Status.Desired, n.Status.Desired)
	})
}
