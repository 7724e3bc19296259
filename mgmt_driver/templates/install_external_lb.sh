#!/usr/bin/env bash
# Prepare the external load balancer VM of a kubespray cluster: install
# HAProxy, cmp (diffutils) and kubectl (and keepalived for highly
# available gateways) on Ubuntu or Debian.  Idempotent: run it again and it
# only installs what is missing.  The kubespray MgmtDriver runs it as root
# (or under sudo) before it writes /etc/haproxy/haproxy.cfg itself.
#
# Usage: install_external_lb.sh [--kubectl-version 1.30.2 | --kubectl-channel v1.30]
#                               [--with-keepalived]
#
#   --kubectl-version X.Y.Z  install exactly this kubectl (from the
#                            Kubernetes apt repository of its minor release)
#   --kubectl-channel vX.Y   minor release repository to take the newest
#                            kubectl from when no exact version is given
#                            (default: v1.30)
#   --with-keepalived        install keepalived too (the gateways share a
#                            virtual IP); the driver writes its
#                            configuration and starts it
#
# Proxies: http_proxy, https_proxy and no_proxy from the environment are
# passed to apt and curl (curl also honours no_proxy).  The driver gives
# them, when the request has a proxy, on standard input (one NAME=VALUE
# line each, with KUBESPRAY_MGMT_PROXY_ON_STDIN=1): a proxy URL may hold
# credentials, which must not appear on a command line (ps shows it to
# every user of the VM), so apt gets them in a root-only file, not -o.
set -euo pipefail

KUBECTL_VERSION="${KUBECTL_VERSION:-}"
KUBECTL_CHANNEL="${KUBECTL_CHANNEL:-v1.30}"
WITH_KEEPALIVED=""
# Overridable so that tests can run the script against stub commands.
KEYRING="${LB_APT_KEYRING:-/etc/apt/keyrings/kubernetes-apt-keyring.gpg}"
SOURCES="${LB_APT_SOURCES:-/etc/apt/sources.list.d/kubernetes.list}"

log() { printf 'install_external_lb: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --kubectl-version) KUBECTL_VERSION="${2:?--kubectl-version needs a value}"; shift 2 ;;
        --kubectl-channel) KUBECTL_CHANNEL="${2:?--kubectl-channel needs a value}"; shift 2 ;;
        --with-keepalived) WITH_KEEPALIVED=yes; shift ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) die "unknown argument: $1" ;;
    esac
done

# NAME=VALUE lines on standard input: only the three proxy variables,
# exported as they are (no shell evaluation of a value).
read_proxies() {
    local line name value
    while IFS= read -r line || [ -n "$line" ]; do
        [ -n "$line" ] || continue
        name="${line%%=*}"
        value="${line#*=}"
        case "$name" in
            http_proxy|https_proxy|no_proxy) ;;
            *) die "standard input: not a proxy setting (http_proxy, https_proxy or no_proxy)" ;;
        esac
        export "$name=$value"
    done
}
if [ "${KUBESPRAY_MGMT_PROXY_ON_STDIN:-}" = 1 ]; then
    read_proxies
fi

[ "$(id -u)" -eq 0 ] || die "run as root (or with sudo -E)"
command -v apt-get >/dev/null || die "apt-get not found: Ubuntu or Debian only"

# An exact version decides the repository: 1.30.2 lives in v1.30.
if [ -n "$KUBECTL_VERSION" ]; then
    KUBECTL_VERSION="${KUBECTL_VERSION#v}"
    [[ "$KUBECTL_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] \
        || die "--kubectl-version must look like 1.30.2, got $KUBECTL_VERSION"
    KUBECTL_CHANNEL="v${KUBECTL_VERSION%.*}"
fi
[[ "$KUBECTL_CHANNEL" =~ ^v[0-9]+\.[0-9]+$ ]] \
    || die "--kubectl-channel must look like v1.30, got $KUBECTL_CHANNEL"

# apt reads proxies from its own configuration; the environment's go
# into a file only root reads (mktemp: mode 0600), removed at exit, and
# apt-get names the file (-c), not the URLs.
APT_OPTS=(-y -q -o Dpkg::Options::=--force-confold)
APT_PROXY_CONF=""
remove_apt_proxy_conf() {
    if [ -n "$APT_PROXY_CONF" ]; then rm -f -- "$APT_PROXY_CONF"; fi
}
trap remove_apt_proxy_conf EXIT
apt_proxy_line() {  # $1: http or https, $2: the URL
    case "$2" in
        *[\"\\]*|*[[:cntrl:]]*)
            die "${1}_proxy holds a quote, a backslash or a control character (value not shown)" ;;
    esac
    printf 'Acquire::%s::Proxy "%s";\n' "$1" "$2"
}
if [ -n "${http_proxy:-}${https_proxy:-}" ]; then
    APT_PROXY_CONF="$(mktemp)"
    {
        if [ -n "${http_proxy:-}" ]; then apt_proxy_line http "$http_proxy"; fi
        if [ -n "${https_proxy:-}" ]; then apt_proxy_line https "$https_proxy"; fi
    } > "$APT_PROXY_CONF"
    APT_OPTS+=(-c "$APT_PROXY_CONF")
fi
export DEBIAN_FRONTEND=noninteractive

apt_updated=""
apt_update() {
    if [ -z "$apt_updated" ]; then
        apt-get "${APT_OPTS[@]}" update
        apt_updated=yes
    fi
}

have_package() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

install_packages() {
    local missing=()
    for pkg in "$@"; do
        have_package "$pkg" || missing+=("$pkg")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        return 0
    fi
    apt_update
    apt-get "${APT_OPTS[@]}" install --no-install-recommends "${missing[@]}"
}

install_haproxy() {
    # diffutils: the driver's lb-apply compares each new configuration
    # with the installed one with cmp (Essential on Debian, yet a trimmed
    # image may lack it, and then every apply fails).
    install_packages haproxy diffutils
    # The driver replaces the configuration and reloads; the service only
    # has to run and start at boot.
    systemctl enable haproxy >/dev/null
    systemctl is-active --quiet haproxy || systemctl start haproxy
    log "haproxy: $(haproxy -v | head -n 1)"
}

add_kubernetes_repo() {
    local url="https://pkgs.k8s.io/core:/stable:/${KUBECTL_CHANNEL}/deb/"
    local line="deb [signed-by=${KEYRING}] ${url} /"
    # Rewrite only when the channel changed, so a re-run downloads nothing.
    if [ -s "$KEYRING" ] && [ "$(cat "$SOURCES" 2>/dev/null)" = "$line" ]; then
        return 0
    fi
    install -d -m 0755 "$(dirname "$KEYRING")"
    curl -fsSL --retry 5 "${url}Release.key" | gpg --dearmor --yes -o "$KEYRING"
    chmod 0644 "$KEYRING"
    printf '%s\n' "$line" > "$SOURCES"
    apt_updated=""
}

kubectl_ok() {
    command -v kubectl >/dev/null || return 1
    [ -z "$KUBECTL_VERSION" ] && return 0
    kubectl version --client 2>/dev/null | grep -q "v${KUBECTL_VERSION}\$"
}

install_kubectl() {
    if kubectl_ok; then
        log "kubectl already installed"
        return 0
    fi
    install_packages ca-certificates curl gnupg
    add_kubernetes_repo
    apt_update
    if [ -n "$KUBECTL_VERSION" ]; then
        # Package versions look like 1.30.2-1.1; take the newest build.
        apt-get "${APT_OPTS[@]}" install --allow-downgrades "kubectl=${KUBECTL_VERSION}-*"
    else
        apt-get "${APT_OPTS[@]}" install kubectl
    fi
    log "kubectl: $(kubectl version --client 2>/dev/null | head -n 1)"
}

install_keepalived() {
    install_packages keepalived
    # Started by the driver once its configuration is in place (the
    # package's unit does not start without one); enabled for boots.
    systemctl enable keepalived >/dev/null
    log "keepalived: $(keepalived --version 2>&1 | head -n 1)"
}

install_haproxy
[ -z "$WITH_KEEPALIVED" ] || install_keepalived
install_kubectl
log "done"
