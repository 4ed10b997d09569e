// Command bootimagectl shows what bootimage-operator would do, writing nothing.
//
//	bootimagectl plan [--kubeconfig FILE | -f FILE|DIR ...] [--aws-images FILE] [--vcenter-ca FILE] [--release-version V] [-o table|json]
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

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
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
	kubeconfig := fs.String("kubeconfig", "", "Read the cluster of this kubeconfig (default $KUBECONFIG) instead of files.")
	fs.Var(&files, "f", "A YAML or JSON file, or a folder of them (repeatable): Infrastructure, FeatureGate, ClusterVersion, MachineConfiguration, ConfigMap, MachineSet, ControlPlaneMachineSet, Secret, Node, and Lists of them.")
	awsImages := fs.String("aws-images", "", "A JSON array of AMIs {imageId, ownerId, name, description, creationDate, region, state} to classify AWS images with.")
	vcenterCA := fs.String("vcenter-ca", "", "PEM CAs to trust for vCenter on a live cluster (default: the system's). vCenter is only read.")
	releaseVersion := fs.String("release-version", "", "Release version whose feature gates apply (default: ClusterVersion status.desired.version).")
	output := fs.String("o", "table", "Output format: table or json.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUnusable
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "bootimagectl plan: -o must be table or json, not %q\n", *output)
		return exitUnusable
	}
	in, err := planSource(ctx, files, *kubeconfig, *vcenterCA)
	if err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	if in.vcenters != nil {
		defer in.vcenters.Close(ctx)
	}
	var images bootimage.Catalog
	if *awsImages != "" {
		static, err := cloud.LoadStatic(*awsImages)
		if err != nil {
			fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
			return exitUnusable
		}
		images = static
	}
	p, err := plan(ctx, in, *releaseVersion, images)
	if err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	if err := printPlan(stdout, p, *output); err != nil {
		fmt.Fprintf(stderr, "bootimagectl plan: %v\n", err)
		return exitUnusable
	}
	if p.Summary.Error > 0 {
		return exitItemErr
	}
	return exitOK
}

func planSource(ctx context.Context, files []string, kubeconfig, vcenterCA string) (planInputs, error) {
	scheme := controllers.NewScheme()
	if len(files) > 0 {
		objs, err := loadFiles(scheme, files)
		if err != nil {
			return planInputs{}, err
		}
		return fromObjects(objs), nil
	}
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		return planInputs{}, fmt.Errorf("give -f FILE|DIR or --kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return planInputs{}, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return planInputs{}, err
	}
	in, err := fromCluster(ctx, c)
	if err != nil {
		return planInputs{}, err
	}
	// A live plan reads vSphere templates with the operator's credentials; it never writes.
	in.vcenters = &cloud.VCenters{Credentials: controllers.VSphereCredentials(c)}
	if vcenterCA != "" {
		pem, err := os.ReadFile(vcenterCA)
		if err != nil {
			return planInputs{}, err
		}
		in.vcenters.RootCAs = x509.NewCertPool()
		if !in.vcenters.RootCAs.AppendCertsFromPEM(pem) {
			return planInputs{}, fmt.Errorf("--vcenter-ca %s: no PEM certificate", vcenterCA)
		}
	}
	return in, nil
}
