package bootimage

import (
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
)

// ClusterObjects are the cluster-wide objects a decision reads; any may be nil when missing.
type ClusterObjects struct {
	Infrastructure *configv1.Infrastructure
	ClusterVersion *configv1.ClusterVersion
	BootImages     *corev1.ConfigMap
	// Gates are the gates in force; nil when unknown, with GatesError saying why.
	Gates      Gates
	GatesError error
	// Effective is the boot image configuration in force.
	Effective        operatorv1.ManagedBootImages
	ControlPlaneArch string
	// Clouds are the cloud lookups available; the platform's is the decisions' Cluster.Cloud.
	Clouds       Clouds
	ParseStreams func(*corev1.ConfigMap) (*Streams, error)
	// Pools are the MachineConfigPools, and OSImageStream the cluster's OSImageStream (nil
	// before 5.0): they give the OS stream of unlabelled objects.
	Pools         []mcfgv1.MachineConfigPool
	OSImageStream *mcfgv1.OSImageStream
}

// NewCluster assembles the input of Decide from the cluster's objects, the same way for the
// operator and for `bootimagectl plan`.
func NewCluster(o ClusterObjects) Cluster {
	c := Cluster{
		Gates: o.Gates, GatesError: o.GatesError, Effective: o.Effective,
		ControlPlaneArch: o.ControlPlaneArch, BootImages: o.BootImages, ParseStreams: o.ParseStreams,
	}
	if infra := o.Infrastructure; infra != nil {
		c.Infrastructure = infra
		c.Platform = PlatformOf(infra)
		c.Cloud = o.Clouds[c.Platform]
		c.InfrastructureName = infra.Status.InfrastructureName
	}
	if len(o.Pools) > 0 {
		c.PoolStreams = make(map[string]string, len(o.Pools))
		for _, p := range o.Pools {
			c.PoolStreams[p.Name] = p.Spec.OSImageStream.Name
		}
	}
	if o.OSImageStream != nil {
		c.DefaultOSStream = o.OSImageStream.Status.DefaultStream
	}
	// Without a ClusterVersion nothing says an update is under way (the status writer reports the
	// missing object); holding every boot image back would only hide the problem.
	c.Stable = true
	if cv := o.ClusterVersion; cv != nil {
		c.Stable = len(cv.Status.History) > 0 && cv.Status.History[0].State == configv1.CompletedUpdate
		c.MultiArch = cv.Status.Desired.Architecture == configv1.ClusterVersionArchitectureMulti
	}
	return c
}
