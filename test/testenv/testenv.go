// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with the
// openshift/api CRDs, for integration tests and `make run`.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// Namespaces every test cluster has.
var Namespaces = []string{"openshift-machine-api", "openshift-machine-config-operator", "openshift-config", CAPINamespace}

// Options change what Start sets up.
type Options struct {
	// FeatureSet chooses the CRD variants; TechPreviewNoUpgrade when empty.
	FeatureSet string
	// MutateCRD, when set, may change each CRD before it is installed (for example to remove a
	// validation rule, as on a cluster whose CRD predates it).
	MutateCRD func(*apiextensionsv1.CustomResourceDefinition)
	// SkipCRD, when set, leaves out the CRDs it returns true for (as on a cluster without the
	// MachineAPI capability); a spec may install them later.
	SkipCRD func(*apiextensionsv1.CustomResourceDefinition) bool
	// CAPI adds the Cluster API CRDs (LoadCAPICRDs).
	CAPI bool
}

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// CacheSyncTimeout, when set, is how long the operators started on it let a controller wait
	// for its caches (controller-runtime's default, 2 minutes, otherwise).
	CacheSyncTimeout time.Duration
	env              *envtest.Environment
}

// Start builds the binaries when missing, starts kube-apiserver and etcd, installs the CRDs and
// creates the standard namespaces.
func Start(opts Options) (*Env, error) {
	binDir, err := EnsureBinaries()
	if err != nil {
		return nil, err
	}
	crds, err := LoadCRDs(opts.FeatureSet)
	if err != nil {
		return nil, err
	}
	if opts.CAPI {
		capi, err := LoadCAPICRDs()
		if err != nil {
			return nil, err
		}
		crds = append(crds, capi...)
	}
	if opts.SkipCRD != nil {
		kept := crds[:0]
		for _, crd := range crds {
			if !opts.SkipCRD(crd) {
				kept = append(kept, crd)
			}
		}
		crds = kept
	}
	if opts.MutateCRD != nil {
		for _, crd := range crds {
			opts.MutateCRD(crd)
		}
	}
	scheme := kube.NewScheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		CRDs:                     crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: envtestTimeout,
		Scheme:                   scheme,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", binDir, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	for _, ns := range Namespaces {
		err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			_ = env.Stop()
			return nil, err
		}
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, env: env}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// WriteKubeconfig writes a kubeconfig for an admin user of the control plane to path.
func (e *Env) WriteKubeconfig(path string) error {
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// LoadCRDs reads the CRDs of manifests.CRDs from the openshift/api module for featureSet, as
// manifests.ReadCRD serves them.
func LoadCRDs(featureSet string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if featureSet == "" {
		featureSet = manifests.TechPreviewNoUpgrade
	}
	paths, err := manifests.CRDPaths(featureSet)
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, p := range paths {
		data, err := manifests.ReadCRD(featureSet, p)
		if err != nil {
			return nil, err
		}
		crd, err := parseCRD(p, data)
		if err != nil {
			return nil, err
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

func parseCRD(path string, data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("parsing CRD %s: %w", path, err)
	}
	return crd, nil
}

// CAPINamespace holds OpenShift's Cluster API objects (and the operator's Role for them).
const CAPINamespace = "openshift-cluster-api"

// LoadCAPICRDs reads the Cluster API CRDs of manifests.CAPICRDPaths, each serving only its storage
// version: the others need the providers' conversion webhooks, which envtest does not run.
func LoadCAPICRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var providers []manifests.CAPIProvider
	for _, p := range bootimage.Platforms() {
		if t := p.Traits(); t.TemplateKind != "" {
			providers = append(providers, manifests.CAPIProvider{Module: t.ClusterAPIProvider, TemplateKind: t.TemplateKind})
		}
	}
	paths, err := manifests.CAPICRDPaths(providers)
	if err != nil {
		return nil, err
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		crd, err := parseCRD(p, data)
		if err != nil {
			return nil, err
		}
		crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return !v.Storage })
		if len(crd.Spec.Versions) != 1 || !crd.Spec.Versions[0].Served {
			return nil, fmt.Errorf("CRD %s: no served storage version", p)
		}
		crd.Spec.Conversion = nil
		crds = append(crds, crd)
	}
	return crds, nil
}

// EnsureBinaries returns the folder holding kube-apiserver and etcd, building them from the pinned
// tools modules (hack/build-k8s.sh) when missing or stale.
func EnsureBinaries() (string, error) {
	root := manifests.RepoRoot()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "build-k8s.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building kube-apiserver and etcd (hack/build-k8s.sh): %w", err)
	}
	return filepath.Join(root, "bin", "k8s"), nil
}

// envtestTimeout leaves room for a loaded 2-core machine running several suites at once.
const envtestTimeout = 2 * time.Minute
