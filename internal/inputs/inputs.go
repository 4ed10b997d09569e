// Package inputs loads a cluster's inputs for the boot image reconcilers and bootimagectl plan:
// everything a boot image decision reads
// besides the object itself, and what each object's decision reads about it (its user-data
// Secret; for a Cluster API object its template, its Machine API twin and its Cluster), all
// through a client.Reader. The operator's reconcilers pass their cache-backed client,
// `bootimagectl plan` its direct client on a cluster and an Objects reader over the files it was
// given, so the CLI cannot read the cluster otherwise than the operator. The ways they differ on
// purpose are the Loader's options, named where they are set. The MachineConfiguration status
// reconciler does not load through Load: it reads the same objects with this package's functions
// (GetOptional, BootImages, Version), as it composes from a spec its migrations may just have
// changed in memory.
//
// It is its own package rather than part of internal/kube, which says where the inputs live and
// builds the cloud catalogues from them: the loader reads through kube and internal/capi and
// assembles bootimage.Cluster, and neither front end reaches past it for its inputs.
package inputs

import (
	"context"
	"runtime"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

// Selection says which boot image configuration (which objects are selected) the decisions take.
type Selection int

const (
	// SelectionStatus is the operator's: MachineConfiguration/cluster
	// status.managedBootImagesStatus. Until that exists and is computed for the current generation
	// nothing is decided (Load reads nothing more and Inputs.InForce is false): deciding earlier
	// would report objects as not selected only because the status is not there yet.
	SelectionStatus Selection = iota
	// SelectionStatusOrSpec is a live plan's: the status when it is in force, else the
	// configuration computed from spec as the operator will compute it, so there is a plan to
	// show; Inputs.InForce says which.
	SelectionStatusOrSpec
	// SelectionSpec is a plan from files: always computed from spec, since a dump's status may be
	// of another spec.
	SelectionSpec
)

// Loader reads a cluster's inputs through Reader.
type Loader struct {
	Reader client.Reader
	// Gates gives the feature gates in force (the operator's reader, or kube.GateSource over
	// Reader).
	Gates featuregates.Reader
	// Namespace holds the coreos-bootimages ConfigMap; "" is kube.MCONamespace.
	Namespace string
	// Clouds are handed to the decisions as they are, and Streams as the parser of the stream
	// (bootimage.ClusterObjects).
	Clouds  bootimage.Clouds
	Streams *StreamCache
	// Selection is the configuration decided by.
	Selection Selection
	// Complete says Reader holds the whole cluster, so an object it lacks does not exist: true on a
	// cluster. Files may simply not carry an object: a user-data Secret they lack is not checked
	// (UserData returns nil) rather than reported missing.
	Complete bool
	// InPlace says Reader is a cache whose objects may be read where they are: the cluster-wide
	// inputs are read without a copy (nothing reads them but the decisions, which never write
	// them), so a wave of N decisions does not copy the coreos-bootimages ConfigMap N times; and
	// it has kube.ControlPlaneNodeIndex.
	InPlace bool
}

// Inputs are the cluster-wide inputs of the decisions.
type Inputs struct {
	// MachineConfiguration is MachineConfiguration/cluster, nil when there is none.
	MachineConfiguration *operatorv1.MachineConfiguration
	// InForce says its status is computed for its current generation: the operator decides only
	// then, by that status.
	InForce bool
	// Objects are what Cluster was assembled from; Effective is the configuration decided by.
	Objects bootimage.ClusterObjects
	Cluster bootimage.Cluster
	// Version identifies the inputs the decisions are taken on (see Version).
	Version string
}

// Load reads the cluster-wide inputs. Under SelectionStatus, while the selection is not in force,
// it returns only MachineConfiguration and InForce false.
func (l Loader) Load(ctx context.Context) (Inputs, error) {
	var in Inputs
	var err error
	if in.MachineConfiguration, err = GetOptional(ctx, l.Reader, client.ObjectKey{Name: kube.MachineConfigurationName}, &operatorv1.MachineConfiguration{}, l.getOptions()...); err != nil {
		return in, err
	}
	mc := in.MachineConfiguration
	in.InForce = mc != nil && mc.Status.ObservedGeneration == mc.Generation
	if l.Selection == SelectionStatus && !in.InForce {
		return in, nil
	}
	objs := bootimage.ClusterObjects{Clouds: l.Clouds}
	if l.Streams != nil {
		objs.ParseStreams = l.Streams.Parse
	}
	if objs.Infrastructure, err = GetOptional(ctx, l.Reader, client.ObjectKey{Name: "cluster"}, &configv1.Infrastructure{}, l.getOptions()...); err != nil {
		return in, err
	}
	if objs.ClusterVersion, err = GetOptional(ctx, l.Reader, client.ObjectKey{Name: "version"}, &configv1.ClusterVersion{}, l.getOptions()...); err != nil {
		return in, err
	}
	if objs.BootImages, err = l.BootImages(ctx); err != nil {
		return in, err
	}
	gates, gatesErr := l.Gates.Current(ctx)
	if gatesErr == nil {
		objs.Gates = gates
	}
	objs.GatesError = gatesErr
	nodes := l.Reader
	if l.InPlace {
		nodes = kube.ControlPlaneIndexed{Reader: l.Reader}
	}
	if objs.ControlPlaneArch, err = ControlPlaneArch(ctx, nodes); err != nil {
		return in, err
	}
	if objs.Pools, objs.OSImageStream, err = kube.OSStreamInputs(ctx, l.Reader); err != nil {
		return in, err
	}
	objs.Effective = l.effective(in, objs)
	in.Objects = objs
	in.Cluster = bootimage.NewCluster(objs)
	if mc != nil {
		// A value it does not know keeps the defaults; the status reconciler says what is wrong.
		in.Cluster.Verification, _ = bootimage.VerificationOf(mc.Annotations)
	} else {
		in.Cluster.Verification, _ = bootimage.VerificationOf(nil)
	}
	in.Version = Version(objs.BootImages, objs.Effective, in.Cluster.OSStreamsKey())
	return in, nil
}

// effective is the configuration decided by, as Selection says.
func (l Loader) effective(in Inputs, objs bootimage.ClusterObjects) operatorv1.ManagedBootImages {
	mc := in.MachineConfiguration
	if l.Selection != SelectionSpec && in.InForce {
		return mc.Status.ManagedBootImagesStatus
	}
	if objs.Gates == nil || objs.Infrastructure == nil {
		// Nothing gated acts without the gates, and nothing is decided without the platform: no
		// selection is needed.
		return operatorv1.ManagedBootImages{}
	}
	var spec operatorv1.ManagedBootImages
	if mc != nil {
		spec = mc.Spec.ManagedBootImages
	}
	return bootimage.EffectiveConfiguration(spec, bootimage.PlatformOf(objs.Infrastructure), objs.Gates).Status
}

// BootImages reads the coreos-bootimages ConfigMap, nil when there is none.
func (l Loader) BootImages(ctx context.Context) (*corev1.ConfigMap, error) {
	ns := l.Namespace
	if ns == "" {
		ns = kube.MCONamespace
	}
	return GetOptional(ctx, l.Reader, client.ObjectKey{Namespace: ns, Name: kube.BootImagesConfigMapName}, &corev1.ConfigMap{}, l.getOptions()...)
}

// UserData reads the user-data Secret providerSpec names, in openshift-machine-api; nil when the
// providerSpec names none, or when the Secret is missing and the reader is not Complete.
func (l Loader) UserData(ctx context.Context, providerSpec []byte) (*bootimage.UserData, error) {
	name := bootimage.UserDataSecretName(providerSpec)
	if name == "" {
		return nil, nil
	}
	secret := &corev1.Secret{}
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: kube.MachineAPINamespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err) && l.Complete:
		return &bootimage.UserData{SecretName: name}, nil
	case apierrors.IsNotFound(err):
		return nil, nil // not given: not checked
	case err != nil:
		return nil, err
	}
	return &bootimage.UserData{SecretName: name, Found: true, Data: secret.Data["userData"], ResourceVersion: secret.ResourceVersion}, nil
}

// Version identifies the stream, the OS stream choices and the selection decisions are taken on:
// a decision taken on another version is not current, and its object counts as pending in the
// progress conditions.
func Version(bootImages *corev1.ConfigMap, effective operatorv1.ManagedBootImages, osStreams string) string {
	stream := "none"
	if bootImages != nil {
		stream = bootImages.ResourceVersion
	}
	return stream + "/" + bootimage.SelectionsKey(effective) + "/" + osStreams
}

// ControlPlaneArch returns the control plane's architecture; without a node that says, this
// process's own (the operator runs on the control plane; a plan assumes this machine's).
func ControlPlaneArch(ctx context.Context, r client.Reader) (string, error) {
	return kube.ControlPlaneArch(ctx, r, runtime.GOARCH)
}

// GetOptional gets key into obj, returning nil when it does not exist.
func GetOptional[T client.Object](ctx context.Context, r client.Reader, key client.ObjectKey, obj T, opts ...client.GetOption) (T, error) {
	var none T
	err := r.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, err
	}
	return obj, nil
}

// getOptions are the options of the loader's reads (InPlace).
func (l Loader) getOptions() []client.GetOption {
	if l.InPlace {
		return []client.GetOption{client.UnsafeDisableDeepCopy}
	}
	return nil
}
