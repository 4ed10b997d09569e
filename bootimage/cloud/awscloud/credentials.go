package awscloud

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud"
)

// roleSessionName names the operator's sessions in CloudTrail.
const roleSessionName = "bootimage-operator"

// awsCredentials builds the credentials of s in memory, cached until they expire: STS web identity
// when the shared config names a role and a token file (the cloud credential operator's format
// on STS clusters), else static keys. Nothing is written to disk: the root filesystem is read-only.
func awsCredentials(s Settings, region string, httpClient aws.HTTPClient, metrics cloud.Observer) (aws.CredentialsProvider, error) {
	keys := sharedConfigKeys{"aws_access_key_id": s.AccessKeyID, "aws_secret_access_key": s.SecretAccessKey}
	if len(s.SharedConfig) > 0 {
		parsed, err := parseSharedConfig(s.SharedConfig)
		if err != nil {
			return nil, err
		}
		keys = parsed
	}
	switch {
	case keys["role_arn"] != "" && keys["web_identity_token_file"] != "":
		client := observedSTS{sts.New(sts.Options{Region: region, HTTPClient: httpClient, BaseEndpoint: optional(s.STSEndpoint)}), metrics}
		// The token file is the projected service account token: read on every refresh, as the
		// kubelet rotates it.
		provider := stscreds.NewWebIdentityRoleProvider(client, keys["role_arn"], stscreds.IdentityTokenFile(keys["web_identity_token_file"]),
			func(o *stscreds.WebIdentityRoleOptions) { o.RoleSessionName = roleSessionName })
		return aws.NewCredentialsCache(provider), nil
	case keys["aws_access_key_id"] != "" && keys["aws_secret_access_key"] != "":
		return aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(keys["aws_access_key_id"], keys["aws_secret_access_key"], keys["aws_session_token"])), nil
	case keys["role_arn"] != "" || keys["web_identity_token_file"] != "":
		return nil, fmt.Errorf("AWS credentials: role_arn and web_identity_token_file must both be set for STS web identity")
	default:
		return nil, fmt.Errorf("AWS credentials hold neither static keys (aws_access_key_id, aws_secret_access_key) nor STS web identity (role_arn, web_identity_token_file)")
	}
}

// sharedConfigKeys are the key = value pairs of one profile of an AWS shared config file.
type sharedConfigKeys map[string]string

// parseSharedConfig reads the default profile of an AWS shared config or credentials file. The
// SDK loads these only from files; the cloud credential operator writes one small profile, so the
// INI lines are read here, in memory.
func parseSharedConfig(data []byte) (sharedConfigKeys, error) {
	keys := sharedConfigKeys{}
	section := ""
	sawDefault := false
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; scanner.Scan(); line++ {
		text := strings.TrimSpace(scanner.Text())
		switch {
		case text == "" || strings.HasPrefix(text, "#") || strings.HasPrefix(text, ";"):
		case strings.HasPrefix(text, "[") && strings.HasSuffix(text, "]"):
			section = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text[1:len(text)-1]), "profile "))
			sawDefault = sawDefault || section == "default"
		default:
			key, value, ok := strings.Cut(text, "=")
			if !ok {
				return nil, fmt.Errorf("AWS shared config line %d: not key = value", line)
			}
			if section == "default" {
				keys[strings.TrimSpace(key)] = strings.TrimSpace(value)
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("AWS shared config: %w", err)
	}
	if !sawDefault {
		return nil, fmt.Errorf("AWS shared config has no [default] profile")
	}
	return keys, nil
}

// observedSTS records the metrics of each AssumeRoleWithWebIdentity call.
type observedSTS struct {
	*sts.Client
	metrics cloud.Observer
}

func (c observedSTS) AssumeRoleWithWebIdentity(ctx context.Context, in *sts.AssumeRoleWithWebIdentityInput, opts ...func(*sts.Options)) (*sts.AssumeRoleWithWebIdentityOutput, error) {
	start := time.Now()
	out, err := c.Client.AssumeRoleWithWebIdentity(ctx, in, opts...)
	cloud.Observe(c.metrics, apiAssumeRoleWithWebIdentity, start, err)
	return out, err
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
