# Training run of the sandbox image's AOT cache (sourced by jlink/link-image.sh in the image's
# directory, NAME as $1): the runtime's health probe, --check, walks the startup path (probes,
# resolver view, DNS relay) and ends by itself. It needs fresh network and mount namespaces,
# as the process driver gives the runtime; unshare is a build-time tool, never in the image.
name=$1
exec unshare --user --map-root-user --net --mount bin/java -XX:AOTCacheOutput="lib/$name.aot" "@conf/$name.args" --check
