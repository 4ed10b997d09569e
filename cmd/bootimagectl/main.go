// Command bootimagectl shows what bootimage-operator would do, writing nothing.
//
//	bootimagectl plan [--kubeconfig FILE [--offline] | -f FILE|DIR ...] [--aws-images FILE] [--vcenter-ca FILE] [--release-version V] [-o table|json]
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
	gcpimages "github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcp"
	"github.com/bootimage-operator/bootimage-operator/controllers"
)

// Exit codes.
const (
	exitOK       = 0
	exitItemErr  = 1
	exitUnusable = 2
)

const usage = `bootimagectl shows what bootimage-operator would do, writing nothing.

Commands:
  plan           boot image decisions for every MachineSet and the ControlPlaneMachineSet
  refresh plan   whether a worker config change can be applied in place, and which actions follow

Run 'bootimagectl COMMAND -h' for the flags of a command.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "plan":
		return runPlan(ctx, args[1:], stdout, stderr)
	case len(args) > 1 && args[0] == "refresh" && args[1] == "plan":
		return runRefreshPlan(args[2:], stdout, stderr)
	default:
		fmt.Fprint(stderr, usage)
		return exitUnusable
	}
}

type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bootimagectl plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileList
	kubeconfig := fs.String("kubeconfig", "", "Read the cluster of this kubeconfig (default $KUBECONFIG) instead of files, and look images up in its cloud with its credentials Secrets, as the operator does.")
	offline := fs.Bool("offline", false, "Look no image up in a cloud: only in --aws-images. Always so with -f.")
	fs.Var(&files, "f", "A YAML or JSON file, or a folder of them (repeatable): Infrastructure, FeatureGate, ClusterVersion, MachineConfiguration, ConfigMap, MachineSet, ControlPlaneMachineSet, Secret, Node, and Lists of them.")
	awsImages := fs.String("aws-images", "", "A JSON array of AMIs {imageId, ownerId, name, description, creationDate, region, state} to classify AWS images with, instead of EC2.")
	vcenterCA := fs.String("vcenter-ca", "", "PEM CAs to trust for vCenter on a live cluster (default: the system's). vCenter is only read.")
	releaseVersion := fs.String("release-version", "", "Release version whose feature gates apply (default: ClusterVersion status.desired.version).")
	output := fs.String("o", "table", "Output format: table or json.")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "bootimagectl plan: -o must be table or json, not %q\n", *output)
		return exitUnusable
	}
	in, c, err := planSource(ctx, files, *kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	if *offline {
		c = nil
	}
	if c != nil {
		// A live plan reads vSphere templates with the operator's credentials; it never writes.
		if in.vcenters, err = vCenters(c, *vcenterCA); err != nil {
			fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
			return exitUnusable
		}
		defer in.vcenters.Close(ctx)
	}
	images, notes, err := imageCatalog(in, c, *awsImages)
	if err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	p, err := plan(ctx, in, *releaseVersion, images)
	if err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	p.Notes = append(notes, p.Notes...)
	if err := printPlan(stdout, p, *output); err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	if p.Summary.Error > 0 {
		return exitItemErr
	}
	return exitOK
}

// planSource reads the plan's inputs from files or from the cluster of kubeconfig; for a cluster
// it also returns the direct (uncached) client it read them with.
func planSource(ctx context.Context, files []string, kubeconfig string) (planInputs, client.Reader, error) {
	scheme := controllers.NewScheme()
	if len(files) > 0 {
		objs, err := loadFiles(scheme, files)
		if err != nil {
			return planInputs{}, nil, err
		}
		return fromObjects(objs), nil, nil
	}
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		return planInputs{}, nil, fmt.Errorf("give -f FILE|DIR or --kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return planInputs{}, nil, err
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
func imageCatalog(in planInputs, c client.Reader, awsImages string) (bootimage.Catalog, []string, error) {
	if awsImages != "" {
		static, err := cloud.LoadStatic(awsImages)
		if err != nil {
			return nil, nil, err
		}
		return static, nil, nil
	}
	var platform configv1.PlatformType
	if in.infra != nil {
		platform = bootimage.PlatformOf(in.infra)
	}
	if c == nil {
		if platform == configv1.AWSPlatformType {
			return nil, []string{"No AMI catalogue (no --aws-images; files and --offline reach no cloud): AMIs are not looked up, so RHCOS AMIs show as CustomImage"}, nil
		}
		return nil, nil, nil
	}
	var notes []string
	if cc, ok := cloudCredentials[platform]; ok && in.secrets[cc.secret] == nil {
		notes = append(notes, fmt.Sprintf("No Secret %s/%s: %s", controllers.MachineAPINamespace, cc.secret, cc.without))
	}
	rootCAs, err := awsCABundle()
	if err != nil {
		return nil, nil, err
	}
	return controllers.ClusterCatalog(c, rootCAs, nil, gcpimages.New), notes, nil
}

// vCenters returns the vCenter reader of a live plan, trusting the CAs of the PEM file caFile
// when given, else the system's.
func vCenters(c client.Reader, caFile string) (*cloud.VCenters, error) {
	vc := &cloud.VCenters{Credentials: controllers.VSphereCredentials(c)}
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

// awsCABundle reads AWS_CA_BUNDLE, the AWS SDK's and CLI's variable for a private CA, into the
// CAs trusted for the cloud endpoints; nil (the system's) when it is not set.
func awsCABundle() (*x509.CertPool, error) {
	path := os.Getenv("AWS_CA_BUNDLE")
	if path == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("AWS_CA_BUNDLE %s holds no PEM certificate", path)
	}
	return pool, nil
}

// cloudCredentials name, per platform, the Secret its image catalogue needs and what is lost
// without it.
var cloudCredentials = map[configv1.PlatformType]struct{ secret, without string }{
	configv1.AWSPlatformType: {controllers.AWSCredentialsSecret, "AMIs cannot be looked up in EC2, by the operator either, so RHCOS AMIs show as CustomImage"},
	configv1.GCPPlatformType: {controllers.GCPCredentialsSecret, "target images are not pre-flight checked, by the operator either"},
}

// parseFlags parses args into fs; done says the command ends there with code: help was asked for
// (exit 0) or a flag is wrong (fs already said which).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return exitOK, true
	default:
		return exitUnusable, true
	}
}

// failure returns a function that says on stderr, after the command's name, why the input is
// unusable, and gives the exit code for that.
func failure(stderr io.Writer, command string) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, command+": "+format+"\n", a...)
		return exitUnusable
	}
}
