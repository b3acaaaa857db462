# gatekeeper preinstalled on python:3.11 with the CPU torch: the image of the
# component's CPU jobs (input image, with install: ""). Built by
# scripts/build_image.sh from the wheel in dist/ (make dist).
FROM python:3.11-slim
ARG WHEEL
COPY ${WHEEL} /tmp/wheels/
# The CPU wheel index: never a multi-GB CUDA torch.
RUN python -m pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu \
        "$(ls /tmp/wheels/*.whl)[onnx,report,postgres]" \
    && rm -rf /tmp/wheels \
    && gatekeeper --version
