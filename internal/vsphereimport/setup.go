package vsphereimport

import (
	"context"
	"crypto/x509"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/vsphere"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
)

// DefaultOVACacheDir is where downloaded OVAs are kept: a writable volume of the Deployment.
const DefaultOVACacheDir = "/var/cache/bootimage-operator"

// DefaultOVACacheBytes bounds the OVA cache: an RHCOS OVA is about 1.2 GB.
const DefaultOVACacheBytes = 4 << 30

// Setup adds the vCenter sessions and the template imports to mgr and returns the imports,
// which vSphere updates wait for and which trigger their MachineSets when done.
func Setup(mgr ctrl.Manager, rootCAs *x509.CertPool, cacheDir string) (*vspherecloud.VCenters, *Imports, error) {
	reader := mgr.GetAPIReader()
	vcenters := &vspherecloud.VCenters{RootCAs: rootCAs, Credentials: kube.VSphereCredentials(reader)}
	if cacheDir == "" {
		cacheDir = DefaultOVACacheDir
	}
	ovas := &vspherecloud.OVACache{Dir: cacheDir, MaxBytes: DefaultOVACacheBytes}
	imports := &Imports{Swapper: vsphere.Swapper{
		Store:       vcenters,
		OVA:         ovas.Get,
		NewDiskType: func(ctx context.Context) (string, error) { return installConfigDiskType(ctx, reader) },
		AfterStep: func(ctx context.Context, step vsphere.SwapStep) error {
			return seams.AfterTemplateStep(ctx, string(step))
		},
	}}
	for _, r := range []interface{ Start(context.Context) error }{vcenters, imports} {
		if err := mgr.Add(r); err != nil {
			return nil, nil, err
		}
	}
	return vcenters, imports, nil
}

// installConfigDiskType is platform.vsphere.diskType of the install config: a new failure domain
// has no template to take it from. Without an install config, the datastore's policy decides.
func installConfigDiskType(ctx context.Context, reader client.Reader) (string, error) {
	cm := &corev1.ConfigMap{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: kube.VSphereCredentialsNamespace, Name: kube.InstallConfigConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ConfigMap %s/%s: %w", kube.VSphereCredentialsNamespace, kube.InstallConfigConfigMap, err)
	}
	var ic struct {
		Platform struct {
			VSphere struct {
				DiskType string `json:"diskType"`
			} `json:"vsphere"`
		} `json:"platform"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["install-config"]), &ic); err != nil {
		return "", fmt.Errorf("ConfigMap %s/%s key install-config: %w", kube.VSphereCredentialsNamespace, kube.InstallConfigConfigMap, err)
	}
	return ic.Platform.VSphere.DiskType, nil
}
