# gatekeeper preinstalled on a rocm/pytorch image: its ROCm torch is kept
# (gatekeeper only declares torch>=2.1). scripts/build_image.sh tags the result
# with the ROCm version read from the image itself (/opt/rocm/.info/version).
ARG BASE=rocm/pytorch:latest
FROM ${BASE}
ARG WHEEL
COPY ${WHEEL} /tmp/wheels/
RUN python -m pip install --no-cache-dir "$(ls /tmp/wheels/*.whl)[onnx,postgres]" \
    && rm -rf /tmp/wheels \
    && gatekeeper --version \
    && python -c "import torch; print('torch', torch.__version__, 'hip', torch.version.hip)"
