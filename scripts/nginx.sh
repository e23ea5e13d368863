# Sourced by the check scripts: sets MAITRED_NGINX to Debian's nginx, installing it if
# missing. (Not NGINX: nginx itself reads that variable, for inherited sockets.)
nginx_bin="${MAITRED_NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"
if [ ! -x "$nginx_bin" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # RUNLEVEL=1: installing must not start the distribution's own nginx on port 80;
  # the checks run it themselves, on ports of their choosing.
  install_nginx() { $sudo env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y --no-install-recommends nginx >/dev/null; }
  install_nginx || { $sudo apt-get update -qq && install_nginx; }
  nginx_bin=/usr/sbin/nginx
fi
export MAITRED_NGINX="$nginx_bin"
