// Command bootimagectl shows what bootimage-operator would do and did; only restore --apply writes. It is a
// kubectl-family tool: it finds the cluster as kubectl does and prints tables, JSON or YAML.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	_ "github.com/bootimage-operator/bootimage-operator/bootimage/platforms"
	"github.com/bootimage-operator/bootimage-operator/internal/buildinfo"
)

// Exit codes.
const (
	exitOK       = 0
	exitItemErr  = 1
	exitUnusable = 2
	// With `refresh plan --exit-code`: the change needs a reboot, or cannot be applied at all.
	exitReboot = 3
	exitReject = 4
)

// exitError ends a command with code; err, when set, is said on stderr after the command's path.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// unusable is input a command cannot work from (exit 2).
func unusable(format string, a ...any) error {
	return exitError{code: exitUnusable, err: fmt.Errorf(format, a...)}
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithStdin(ctx, os.Stdin, args, stdout, stderr)
}

// runWithStdin is run reading stdin from in (`-f -`).
func runWithStdin(ctx context.Context, in io.Reader, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout)
	root.SetIn(in)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), ee.err)
		}
		return ee.code
	}
	// cobra's own errors: an unknown command or flag, a flag value that does not parse.
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return exitUnusable
}

func newRootCommand(stdout io.Writer) *cobra.Command {
	cluster := &clusterFlags{}
	root := &cobra.Command{
		Use:   "bootimagectl",
		Short: "Shows what bootimage-operator would do, and restores a boot image by hand",
		Long: `bootimagectl shows what bootimage-operator would do, and what it did. Every command reads
only, but for restore --apply.

It finds the cluster as kubectl does: --kubeconfig, else the $KUBECONFIG list, else
~/.kube/config, with --context to pick a context. Cloud endpoints are trusted with the
system's CAs plus $SSL_CERT_FILE, as the operator's are.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		// Errors and exit codes are said once, by run.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cluster.addFlags(root.PersistentFlags())
	refresh := &cobra.Command{
		Use:   "refresh",
		Short: "Whether a worker config change can be applied in place",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	refresh.AddCommand(newRefreshPlanCommand(cluster, stdout))
	root.AddCommand(newPlanCommand(cluster, stdout), newHistoryCommand(cluster, stdout), newRestoreCommand(cluster, stdout), refresh, newVersionCommand(stdout))
	return root
}

func newVersionCommand(stdout io.Writer) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of bootimagectl",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := buildinfo.Read()
			switch output {
			case "":
				_, err := fmt.Fprintf(stdout, "bootimagectl %s\n", info)
				return err
			case "json", "yaml":
				return printStructured(stdout, info, output)
			default:
				return unusable("-o must be json or yaml, not %q", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: one line).")
	return cmd
}

// clusterFlags find the cluster as kubectl does.
type clusterFlags struct {
	kubeconfig string
	context    string
}

func (f *clusterFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: the files of $KUBECONFIG, else ~/.kube/config).")
	fs.StringVar(&f.context, "context", "", "The kubeconfig context to use (default: its current-context).")
}

// restConfig loads the client configuration with clientcmd's loading rules, as kubectl does:
// an explicit --kubeconfig, else the $KUBECONFIG list merged, else ~/.kube/config, else the
// in-cluster service account.
func (f *clusterFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New("no cluster to read: give --kubeconfig, set $KUBECONFIG or write ~/.kube/config")
	}
	return cfg, err
}

// cloudRootCAs are the CAs trusted for cloud endpoints: the system's plus those of
// $SSL_CERT_FILE, as the operator trusts them in its pod (where the cluster's bundle is the
// system's). Read afresh, rather than from Go's once-per-process system pool, so the file is
// always the one set now.
func cloudRootCAs() (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	path := os.Getenv("SSL_CERT_FILE")
	if path == "" {
		return pool, nil
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("SSL_CERT_FILE: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("SSL_CERT_FILE %s holds no PEM certificate", path)
	}
	return pool, nil
}

// checkOutput refuses an output format not among allowed.
func checkOutput(output string, allowed ...string) error {
	for _, a := range allowed {
		if output == a {
			return nil
		}
	}
	return unusable("-o must be one of %s, not %q", joinOr(allowed), output)
}

func joinOr(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	out := ""
	for i, w := range words {
		switch {
		case i == 0:
			out = w
		case i == len(words)-1:
			out += " or " + w
		default:
			out += ", " + w
		}
	}
	return out
}
