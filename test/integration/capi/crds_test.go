package capi_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// The ground the Cluster API specs stand on: the providers' own CRDs, served as OpenShift serves
// them, with their schemas (pruning, required fields) enforced.
var _ = Describe("Cluster API CRDs", func() {
	DescribeTable("serve the objects the operator reads and writes",
		func(manifest string) {
			obj := fixtures.ClusterAPIObject(manifest)
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(k8s.Delete(ctx, obj)).To(Succeed()) })
		},
		Entry("Cluster", `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: demo-x7k2p}
spec:
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSCluster, name: demo-x7k2p}`),
		Entry("MachineSet", `
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata: {name: demo-x7k2p-worker-us-east-1a}
spec:
  clusterName: demo-x7k2p
  selector: {matchLabels: {machineset: demo-x7k2p-worker-us-east-1a}}
  template:
    metadata: {labels: {machineset: demo-x7k2p-worker-us-east-1a}}
    spec:
      clusterName: demo-x7k2p
      bootstrap: {dataSecretName: worker-user-data}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachineTemplate, name: demo-x7k2p-worker-us-east-1a-0a1b2c3d}`),
		Entry("MachineDeployment", `
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: demo-x7k2p-workers}
spec:
  clusterName: demo-x7k2p
  selector: {matchLabels: {pool: workers}}
  template:
    metadata: {labels: {pool: workers}}
    spec:
      clusterName: demo-x7k2p
      bootstrap: {dataSecretName: worker-user-data}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: GCPMachineTemplate, name: demo-x7k2p-workers-1}`),
		Entry("Machine", `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: demo-x7k2p-worker-us-east-1a-abcde
  annotations: {cluster.x-k8s.io/cloned-from-name: demo-x7k2p-worker-us-east-1a-0a1b2c3d}
spec:
  clusterName: demo-x7k2p
  bootstrap: {dataSecretName: worker-user-data}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachine, name: demo-x7k2p-worker-us-east-1a-abcde}`),
		Entry("AWSMachineTemplate", `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachineTemplate
metadata: {name: demo-x7k2p-worker-us-east-1a-0a1b2c3d}
spec:
  template:
    spec:
      instanceType: m6i.xlarge
      ami: {id: ami-0aaaaaaaaaaaaaa01}`),
		Entry("AWSMachine", `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachine
metadata: {name: demo-x7k2p-worker-us-east-1a-abcde}
spec:
  instanceType: m6i.xlarge
  ami: {id: ami-0aaaaaaaaaaaaaa01}`),
		Entry("GCPMachineTemplate", `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: GCPMachineTemplate
metadata: {name: demo-x7k2p-workers-1}
spec:
  template:
    spec:
      instanceType: n2-standard-4
      image: projects/rhcos-cloud/global/images/rhcos-9-6-20250701-0-gcp-x86-64`),
		Entry("AzureMachineTemplate", `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureMachineTemplate
metadata: {name: demo-x7k2p-worker-eastus1-1}
spec:
  template:
    spec:
      vmSize: Standard_D4s_v3
      osDisk: {osType: Linux, diskSizeGB: 128}
      image:
        marketplace: {publisher: azureopenshift, offer: aro4, sku: aro_419, version: 419.6.20250523}`),
	)

	It("serves only each CRD's storage version, without conversion webhooks", func() {
		crds, err := testenv.LoadCAPICRDs()
		Expect(err).NotTo(HaveOccurred())
		Expect(crds).To(HaveLen(10))
		for _, crd := range crds {
			Expect(crd.Spec.Versions).To(HaveLen(1), crd.Name)
			Expect(crd.Spec.Conversion).To(BeNil(), crd.Name)
		}
	})
})
