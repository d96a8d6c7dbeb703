#!/usr/bin/env bash
# The node fixture's credentials (up.sh runs it): a CA, the API server's serving certificate for
# NODE_IP, the service-account keys. usage: test/node/pki.sh <dir> <node ip>
# The CA carries keyUsage as RFC 5280 4.2.1.3 asks of a CA: Python 3.13's ssl verifies with
# VERIFY_X509_STRICT by default (CPython Lib/ssl.py create_default_context) and OpenSSL then refuses a
# CA without it ("CA cert does not include key usage extension"); test/helpers/apiserver.ts does the same.
set -euo pipefail
p=$1 node_ip=$2
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${ec[@]}" -keyout "$p/ca.key" -out "$p/ca.crt" -days 2 -subj /CN=arl-node-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
openssl req "${ec[@]}" -keyout "$p/apiserver.key" -out "$p/apiserver.csr" -subj /CN=kube-apiserver 2>/dev/null
printf 'subjectAltName=IP:%s,IP:127.0.0.1,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' "$node_ip" > "$p/apiserver.ext"
openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -out "$p/apiserver.crt" -days 2 -extfile "$p/apiserver.ext" 2>/dev/null
openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
chmod 600 "$p"/*.key
