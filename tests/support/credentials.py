"""Credential shapes for tests of the credential scan and of masking: made-up tokens of every
shape the scan knows, each with a look-alike that is not one (callers: ``tests/config`` and the
redaction tests of ``tests/core``). None of them is a real credential."""

from __future__ import annotations

#: An RSA private key as a PEM block, its line breaks escaped (as in a double-quoted YAML string).
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\\n"
    "MIIEowIBAAKCAQEA7s3cr3tk3yMaterial\\n"
    "-----END RSA PRIVATE KEY-----\\n"
)

#: A GitHub token of the right shape (made up).
GITHUB = "ghp_" + "Zq9Xw2Lm4Np6Rt8Vb0Cd3Fg5Hj7Kk1Mm2Ps4Uy"
#: Each credential shape the scan flags: (what it is called, an example, a look-alike that is not).
TOKENS = [
    ("an AWS access key id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7"),
    ("an AWS access key id", "ASIAZ3EXAMPLEKEY1234", "Asia/Tokyo"),
    ("a GitHub token", GITHUB, "ghp_short"),
    ("a GitHub token", "gho_" + "a1B2c3D4e5F6g7H8i9J0" * 2, "gho_"),
    ("a GitHub token", "ghs_" + "0" * 36, "ghs_not-a-token"),
    ("a GitHub token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_"),
    ("a GitLab token", "glpat-Ab3dEf6hIj9lMn2pQr5t", "glpat-short"),
    ("a Slack token", "xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxo-hugs-and-kisses"),
    ("a Google API key", "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaShort"),
    (
        "a JSON Web Token",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZXBsb3kifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg",
        "eyJhbGciOiJIUzI1NiJ9",
    ),
    ("a Bearer token", "Bearer 4f7a2c1e9b8d6f3a0c5e7b9d1f3a5c7e", "send a Bearer token here"),
    ("a Bearer token", "authorization: bearer abc.def-1234567890XYZ", "Bearer <token>"),
    ("a Basic credential", "Authorization: Basic ZGVwbG95Omh1bnRlcjI=", "Basic Authentication"),
    (
        "a password in a URL",
        "https://deploy:hunter2@git.example.com/r.git",
        "https://git.example.com",
    ),
    ("a password in a URL", "postgres://app:pw-9q@db:5432/app", "ssh://git@github.com/org/repo"),
    ("an htpasswd entry", "admin:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/", "it costs $5"),
    ("a PEM private key", PEM.replace("\\n", "\n"), "-----BEGIN PUBLIC KEY-----"),
]
