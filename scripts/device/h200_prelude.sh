#!/usr/bin/env bash
# Sourced at the start of a device-tool command on the accelerator machine: installs the carried GL/Vulkan
# loaders, unpacks .stage/sg.tar.xz (scripts/device/stage.sh) into /opt/sg, puts the datasets at their Debian
# paths, and exports PATH/LD_LIBRARY_PATH/SG_SOURCE_DIR. Usage there: `. scripts/device/h200_prelude.sh`.
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
mkdir -p /opt/sg && tar -C /opt/sg -xJf .stage/sg.tar.xz
mkdir -p /usr/share/datasets /usr/lib/python3/dist-packages/sklearn/datasets/data
cp -r /opt/sg/pkg/data/fashion-mnist /usr/share/datasets/
cp /opt/sg/pkg/data/digits.csv.gz /usr/lib/python3/dist-packages/sklearn/datasets/data/
if [ -f /opt/sg/pkg/data/words ]; then mkdir -p /usr/share/dict && cp /opt/sg/pkg/data/words /usr/share/dict/words; fi
export PATH=/opt/sg/pkg/bin:$PATH LD_LIBRARY_PATH=/opt/sg/pkg/lib SG_SOURCE_DIR=$PWD
# NVIDIA's Vulkan ICD, wherever the image put it (the tests pin lavapipe unless VK_DRIVER_FILES is set)
for icd in /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json \
           /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/icd.d/nvidia_icd.json; do
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
done
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
# The Vulkan validation layer (Debian's vulkan-validationlayers, carried in .vvl/) unpacked aside, not into /.
if ls .vvl/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
  dpkg -x .vvl/vulkan-validationlayers_*.deb /opt/vvl
  export VK_LAYER_PATH=/opt/vvl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/opt/vvl/usr/lib/x86_64-linux-gnu
fi
