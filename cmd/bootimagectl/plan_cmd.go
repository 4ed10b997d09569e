package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/vspherecloud"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
)

type planOptions struct {
	files          []string
	offline        bool
	awsImages      string
	vcenterCA      string
	releaseVersion string
	output         string
}

func newPlanCommand(cluster *clusterFlags, stdout io.Writer) *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Boot image decisions for every MachineSet and the ControlPlaneMachineSet",
		Long: `Plan prints the decision the operator takes for every MachineSet in openshift-machine-api and
the ControlPlaneMachineSet, and, while gate ManagedBootImagesAWSCAPI is on, for every Cluster API
MachineSet and MachineDeployment in openshift-cluster-api: Update, NoChange, Skip or Error, with the reason, the current image
and the target. It reads the cluster (or files, with -f) and writes nothing.

Exit status: 0 when the plan was computed, 1 when an item is an Error (a failed cloud lookup
is that item's Error CloudLookupFailed; the others are still planned) or the operator would
report BootImageUpdateDegraded otherwise (ClusterVersion/version missing), 2 when the input is
unusable. Every input the operator reads that is missing is named in a note.`,
		Example: `  bootimagectl plan
  bootimagectl plan -o wide --context admin
  bootimagectl plan --offline --aws-images amis.json -o yaml
  bootimagectl plan -f cluster-dump/ -f machinesets.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(cmd.Context(), o, cluster, cmd.InOrStdin(), stdout)
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "A YAML or JSON file, a folder of them, or - for stdin (repeatable), to plan instead of the cluster: Infrastructure, FeatureGate, ClusterVersion, MachineConfiguration, ConfigMap, MachineSet, ControlPlaneMachineSet, Secret, Node, MachineConfigPool, OSImageStream, Cluster API MachineSet, MachineDeployment, Cluster and AWS/GCP/AzureMachineTemplate, and Lists of them; other kinds and unknown fields are refused. Always offline.")
	fs.BoolVar(&o.offline, "offline", false, "Look no image up in a cloud: only in --aws-images.")
	fs.StringVar(&o.awsImages, "aws-images", "", "AMIs to classify AWS images with, instead of EC2: the output of `aws ec2 describe-images` ({\"Images\": [...]}), or a JSON array of {imageId, ownerId, name, description, creationDate, region, state}.")
	fs.StringVar(&o.vcenterCA, "vcenter-ca", "", "PEM CAs to trust for vCenter (default: the system's). vCenter is only read.")
	fs.StringVar(&o.releaseVersion, "release-version", kube.DefaultReleaseVersion(), "Release version whose feature gates apply, as the operator takes it. Default: $"+kube.ReleaseVersionEnv+", else ClusterVersion/version status.desired.version.")
	fs.StringVarP(&o.output, "output", "o", "table", "Output format: table, wide, json or yaml.")
	return cmd
}

func runPlan(ctx context.Context, o planOptions, cluster *clusterFlags, stdin io.Reader, stdout io.Writer) error {
	if err := checkOutput(o.output, "table", "wide", "json", "yaml"); err != nil {
		return err
	}
	in, c, err := planSource(ctx, o.files, cluster, stdin)
	if err != nil {
		return unusable("%v", err)
	}
	if o.offline {
		c = nil
	}
	if c != nil {
		// A live plan reads vSphere templates with the operator's credentials; it never writes.
		if in.vcenters, err = vCenters(c, o.vcenterCA); err != nil {
			return unusable("%v", err)
		}
		defer in.vcenters.Close(ctx)
	}
	images, notes, err := imageCatalog(in, c, o.awsImages)
	if err != nil {
		return unusable("%v", err)
	}
	p, err := plan(ctx, in, o.releaseVersion, images)
	if err == nil && c != nil {
		p, err = afterGrace(ctx, c, p, time.Now())
	}
	if err != nil {
		return unusable("%v", err)
	}
	p.Notes = append(notes, p.Notes...)
	if err := printPlan(stdout, p, o.output); err != nil {
		return unusable("%v", err)
	}
	if p.Summary.Error > 0 || p.degraded {
		return exitError{code: exitItemErr}
	}
	return nil
}

// planSource reads the plan's inputs from files or from the cluster; for a cluster it also
// returns the direct (uncached) client it read them with.
func planSource(ctx context.Context, files []string, cluster *clusterFlags, stdin io.Reader) (planInputs, client.Reader, error) {
	scheme := kube.NewScheme()
	if len(files) > 0 {
		objs, err := loadFiles(scheme, files, stdin)
		if err != nil {
			return planInputs{}, nil, err
		}
		in, err := fromObjects(scheme, objs)
		return in, nil, err
	}
	cfg, err := cluster.restConfig()
	if err != nil {
		return planInputs{}, nil, fmt.Errorf("%v (or give -f FILE|DIR to plan files)", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return planInputs{}, nil, err
	}
	in, err := fromCluster(ctx, c)
	return in, c, err
}

// imageCatalog returns where the plan looks cloud images up: the --aws-images file when given;
// else, through c (a cluster, not --offline), the clouds as the operator reaches them, from the
// same credentials Secrets and Infrastructure endpoints; else nowhere. notes say, once, what
// cannot be looked up and why.
func imageCatalog(in planInputs, c client.Reader, awsImages string) (bootimage.Clouds, []string, error) {
	if awsImages != "" {
		static, err := awscloud.LoadStatic(awsImages)
		if err != nil {
			return nil, nil, err
		}
		return static.Clouds(), nil, nil
	}
	var platform configv1.PlatformType
	if in.infra != nil {
		platform = bootimage.PlatformOf(in.infra)
	}
	if c == nil {
		if platform == configv1.AWSPlatformType {
			return nil, []string{"No AMI catalogue (no --aws-images; files and --offline reach no cloud): AMIs other than the stream's are not looked up, so they show as CustomImage"}, nil
		}
		return nil, nil, nil
	}
	var notes []string
	if p, ok := bootimage.PlatformFor(platform); ok {
		if cc := p.Traits().Credentials; cc.Secret != "" && in.secrets[cc.Secret] == nil {
			notes = append(notes, fmt.Sprintf("No Secret %s/%s: %s", kube.MachineAPINamespace, cc.Secret, cc.Without))
		}
	}
	rootCAs, err := cloudRootCAs()
	if err != nil {
		return nil, nil, err
	}
	return kube.Clouds(c, rootCAs, cloud.Backoff{}, nil, gcpcloud.New), notes, nil
}

// vCenters returns the vCenter reader of a live plan, trusting the CAs of the PEM file caFile
// when given, else the system's.
func vCenters(c client.Reader, caFile string) (*vspherecloud.VCenters, error) {
	vc := &vspherecloud.VCenters{Credentials: kube.VSphereCredentials(c)}
	if caFile == "" {
		return vc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	vc.RootCAs = x509.NewCertPool()
	if !vc.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--vcenter-ca %s: no PEM certificate", caFile)
	}
	return vc, nil
}

// printStructured prints v as indented JSON or as YAML.
func printStructured(w io.Writer, v any, format string) error {
	if format == "yaml" {
		out, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
