package bootimage

import (
	operatorv1 "github.com/openshift/api/operator/v1"
)

// Cluster API objects, as OpenShift serves them. The pinned openshift/api does not name them yet
// (openshift/api PR #2990).
const (
	// ClusterAPIGroup is the API group of Cluster API MachineSets and MachineDeployments, and
	// the machineManagers apiGroup that selects them.
	ClusterAPIGroup operatorv1.MachineManagerMachineSetsAPIGroupType = "cluster.x-k8s.io"
	// MachineDeployments is the machineManagers resource of Cluster API MachineDeployments.
	MachineDeployments operatorv1.MachineManagerMachineSetsResourceType = "machinedeployments"
	// ClusterAPINamespace holds OpenShift's Cluster API objects.
	ClusterAPINamespace = "openshift-cluster-api"
	// MachineAPINamespace holds the Machine API MachineSets, the twins of mirrored ones.
	MachineAPINamespace = "openshift-machine-api"

	KindMachineDeployment = "MachineDeployment"

	// TopologyOwnedLabel marks the objects of a ClusterClass topology.
	TopologyOwnedLabel = "topology.cluster.x-k8s.io/owned"
)
