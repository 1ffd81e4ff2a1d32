from __future__ import annotations

import ast
from functools import partial

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Severity, Text
from .api_table import spell
from .base import Invalid, Rule, Valid

# torchvision model builder -> the weights enum `pretrained=True` loaded, and the backbone
# weights `pretrained_backbone=True` loaded ("-": no backbone argument; "None": the model had
# no pretrained weights). Names relative to `torchvision.models`.
_WEIGHTS = """
    mobilenet_v2 MobileNet_V2_Weights.IMAGENET1K_V1 -
    mobilenet_v3_large MobileNet_V3_Large_Weights.IMAGENET1K_V1 -
    mobilenet_v3_small MobileNet_V3_Small_Weights.IMAGENET1K_V1 -
    densenet121 DenseNet121_Weights.IMAGENET1K_V1 -
    densenet161 DenseNet161_Weights.IMAGENET1K_V1 -
    densenet169 DenseNet169_Weights.IMAGENET1K_V1 -
    densenet201 DenseNet201_Weights.IMAGENET1K_V1 -
    detection.maskrcnn_resnet50_fpn MaskRCNN_ResNet50_FPN_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    detection.maskrcnn_resnet50_fpn_v2 MaskRCNN_ResNet50_FPN_V2_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    detection.retinanet_resnet50_fpn RetinaNet_ResNet50_FPN_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    detection.retinanet_resnet50_fpn_v2 RetinaNet_ResNet50_FPN_V2_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    optical_flow.raft_large Raft_Large_Weights.C_T_SKHT_V2 -
    optical_flow.raft_small Raft_Small_Weights.C_T_V2 -
    alexnet AlexNet_Weights.IMAGENET1K_V1 -
    convnext_tiny ConvNeXt_Tiny_Weights.IMAGENET1K_V1 -
    convnext_small ConvNeXt_Small_Weights.IMAGENET1K_V1 -
    convnext_base ConvNeXt_Base_Weights.IMAGENET1K_V1 -
    convnext_large ConvNeXt_Large_Weights.IMAGENET1K_V1 -
    inception_v3 Inception_V3_Weights.IMAGENET1K_V1 -
    maxvit_t MaxVit_T_Weights.IMAGENET1K_V1 -
    mnasnet0_5 MNASNet0_5_Weights.IMAGENET1K_V1 -
    mnasnet0_75 MNASNet0_75_Weights.IMAGENET1K_V1 -
    mnasnet1_0 MNASNet1_0_Weights.IMAGENET1K_V1 -
    mnasnet1_3 MNASNet1_3_Weights.IMAGENET1K_V1 -
    detection.fasterrcnn_resnet50_fpn FasterRCNN_ResNet50_FPN_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    detection.fasterrcnn_resnet50_fpn_v2 FasterRCNN_ResNet50_FPN_V2_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    detection.fasterrcnn_mobilenet_v3_large_320_fpn FasterRCNN_MobileNet_V3_Large_320_FPN_Weights.COCO_V1 MobileNet_V3_Large_Weights.IMAGENET1K_V1
    detection.fasterrcnn_mobilenet_v3_large_fpn FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1 MobileNet_V3_Large_Weights.IMAGENET1K_V1
    detection.fcos_resnet50_fpn FCOS_ResNet50_FPN_Weights.COCO_V1 ResNet50_Weights.IMAGENET1K_V1
    segmentation.lraspp_mobilenet_v3_large LRASPP_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1 MobileNet_V3_Large_Weights.IMAGENET1K_V1
    shufflenet_v2_x0_5 ShuffleNet_V2_X0_5_Weights.IMAGENET1K_V1 -
    shufflenet_v2_x1_0 ShuffleNet_V2_X1_0_Weights.IMAGENET1K_V1 -
    shufflenet_v2_x1_5 ShuffleNet_V2_X1_5_Weights.IMAGENET1K_V1 -
    shufflenet_v2_x2_0 ShuffleNet_V2_X2_0_Weights.IMAGENET1K_V1 -
    squeezenet1_0 SqueezeNet1_0_Weights.IMAGENET1K_V1 -
    squeezenet1_1 SqueezeNet1_1_Weights.IMAGENET1K_V1 -
    swin_t Swin_T_Weights.IMAGENET1K_V1 -
    swin_s Swin_S_Weights.IMAGENET1K_V1 -
    swin_b Swin_B_Weights.IMAGENET1K_V1 -
    swin_v2_t Swin_V2_T_Weights.IMAGENET1K_V1 -
    swin_v2_s Swin_V2_S_Weights.IMAGENET1K_V1 -
    swin_v2_b Swin_V2_B_Weights.IMAGENET1K_V1 -
    video.s3d S3D_Weights.KINETICS400_V1 -
    video.swin3d_t Swin3D_T_Weights.KINETICS400_V1 -
    video.swin3d_s Swin3D_S_Weights.KINETICS400_V1 -
    video.swin3d_b Swin3D_B_Weights.KINETICS400_V1 -
    vit_b_16 ViT_B_16_Weights.IMAGENET1K_V1 -
    vit_b_32 ViT_B_32_Weights.IMAGENET1K_V1 -
    vit_l_16 ViT_L_16_Weights.IMAGENET1K_V1 -
    vit_l_32 ViT_L_32_Weights.IMAGENET1K_V1 -
    vit_h_14 None -
    vgg11 VGG11_Weights.IMAGENET1K_V1 -
    vgg11_bn VGG11_BN_Weights.IMAGENET1K_V1 -
    vgg13 VGG13_Weights.IMAGENET1K_V1 -
    vgg13_bn VGG13_BN_Weights.IMAGENET1K_V1 -
    vgg16 VGG16_Weights.IMAGENET1K_V1 -
    vgg16_bn VGG16_BN_Weights.IMAGENET1K_V1 -
    vgg19 VGG19_Weights.IMAGENET1K_V1 -
    vgg19_bn VGG19_BN_Weights.IMAGENET1K_V1 -
    video.mvit_v1_b MViT_V1_B_Weights.KINETICS400_V1 -
    video.mvit_v2_s MViT_V2_S_Weights.KINETICS400_V1 -
    video.r3d_18 R3D_18_Weights.KINETICS400_V1 -
    video.mc3_18 MC3_18_Weights.KINETICS400_V1 -
    video.r2plus1d_18 R2Plus1D_18_Weights.KINETICS400_V1 -
    regnet_y_400mf RegNet_Y_400MF_Weights.IMAGENET1K_V1 -
    regnet_y_800mf RegNet_Y_800MF_Weights.IMAGENET1K_V1 -
    regnet_y_1_6gf RegNet_Y_1_6GF_Weights.IMAGENET1K_V1 -
    regnet_y_3_2gf RegNet_Y_3_2GF_Weights.IMAGENET1K_V1 -
    regnet_y_8gf RegNet_Y_8GF_Weights.IMAGENET1K_V1 -
    regnet_y_16gf RegNet_Y_16GF_Weights.IMAGENET1K_V1 -
    regnet_y_32gf RegNet_Y_32GF_Weights.IMAGENET1K_V1 -
    regnet_y_128gf None -
    regnet_x_400mf RegNet_X_400MF_Weights.IMAGENET1K_V1 -
    regnet_x_800mf RegNet_X_800MF_Weights.IMAGENET1K_V1 -
    regnet_x_1_6gf RegNet_X_1_6GF_Weights.IMAGENET1K_V1 -
    regnet_x_3_2gf RegNet_X_3_2GF_Weights.IMAGENET1K_V1 -
    regnet_x_8gf RegNet_X_8GF_Weights.IMAGENET1K_V1 -
    regnet_x_16gf RegNet_X_16GF_Weights.IMAGENET1K_V1 -
    regnet_x_32gf RegNet_X_32GF_Weights.IMAGENET1K_V1 -
    resnet18 ResNet18_Weights.IMAGENET1K_V1 -
    resnet34 ResNet34_Weights.IMAGENET1K_V1 -
    resnet50 ResNet50_Weights.IMAGENET1K_V1 -
    resnet101 ResNet101_Weights.IMAGENET1K_V1 -
    resnet152 ResNet152_Weights.IMAGENET1K_V1 -
    resnext50_32x4d ResNeXt50_32X4D_Weights.IMAGENET1K_V1 -
    resnext101_32x8d ResNeXt101_32X8D_Weights.IMAGENET1K_V1 -
    resnext101_64x4d ResNeXt101_64X4D_Weights.IMAGENET1K_V1 -
    wide_resnet50_2 Wide_ResNet50_2_Weights.IMAGENET1K_V1 -
    wide_resnet101_2 Wide_ResNet101_2_Weights.IMAGENET1K_V1 -
    efficientnet_b0 EfficientNet_B0_Weights.IMAGENET1K_V1 -
    efficientnet_b1 EfficientNet_B1_Weights.IMAGENET1K_V1 -
    efficientnet_b2 EfficientNet_B2_Weights.IMAGENET1K_V1 -
    efficientnet_b3 EfficientNet_B3_Weights.IMAGENET1K_V1 -
    efficientnet_b4 EfficientNet_B4_Weights.IMAGENET1K_V1 -
    efficientnet_b5 EfficientNet_B5_Weights.IMAGENET1K_V1 -
    efficientnet_b6 EfficientNet_B6_Weights.IMAGENET1K_V1 -
    efficientnet_b7 EfficientNet_B7_Weights.IMAGENET1K_V1 -
    efficientnet_v2_s EfficientNet_V2_S_Weights.IMAGENET1K_V1 -
    efficientnet_v2_m EfficientNet_V2_M_Weights.IMAGENET1K_V1 -
    efficientnet_v2_l EfficientNet_V2_L_Weights.IMAGENET1K_V1 -
    googlenet GoogLeNet_Weights.IMAGENET1K_V1 -
    segmentation.deeplabv3_resnet50 DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1 ResNet50_Weights.IMAGENET1K_V1
    segmentation.deeplabv3_resnet101 DeepLabV3_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1 ResNet101_Weights.IMAGENET1K_V1
    segmentation.deeplabv3_mobilenet_v3_large DeepLabV3_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1 MobileNet_V3_Large_Weights.IMAGENET1K_V1
    segmentation.fcn_resnet50 FCN_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1 ResNet50_Weights.IMAGENET1K_V1
    segmentation.fcn_resnet101 FCN_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1 ResNet101_Weights.IMAGENET1K_V1
    detection.ssd300_vgg16 SSD300_VGG16_Weights.COCO_V1 VGG16_Weights.IMAGENET1K_FEATURES
    detection.ssdlite320_mobilenet_v3_large SSDLite320_MobileNet_V3_Large_Weights.COCO_V1 MobileNet_V3_Large_Weights.IMAGENET1K_V1
"""
WEIGHTS: dict[str, tuple[str | None, str | None]] = {}
for _line in _WEIGHTS.strip().splitlines():
    _model, _main, _backbone = _line.split()
    WEIGHTS[_model] = (
        None if _main == "None" else _main,
        None if _backbone in ("-", "None") else _backbone,
    )
del _line, _model, _main, _backbone
HAS_BACKBONE = frozenset(m for m, (_w, b) in WEIGHTS.items() if b is not None)
_TASKS = ("detection", "segmentation", "video", "optical_flow")
_PREFIX = "torchvision.models."


def model_key(qual: str | None) -> str | None:
    """``resnet50`` for ``torchvision.models.resnet50`` or ``torchvision.models.resnet.resnet50``,
    ``detection.fasterrcnn_resnet50_fpn`` for the detection builders (any sub-module)."""
    if not qual or not qual.startswith(_PREFIX):
        return None
    parts = qual[len(_PREFIX) :].split(".")
    if parts[0] in _TASKS and len(parts) >= 2:
        key = f"{parts[0]}.{parts[-1]}"
    else:
        key = parts[-1] if len(parts) <= 2 else ""
    return key if key in WEIGHTS else None


class TorchvisionPretrained(Rule):
    """## What it does
    Checks for torchvision model builders called with the deprecated `pretrained=` or
    `pretrained_backbone=` arguments (`resnet50(pretrained=True)`).

    ## Why is this bad?
    Since torchvision 0.13 the builders take `weights=` / `weights_backbone=`: a weights enum
    that says exactly which checkpoint is loaded, with its preprocessing
    (`weights.transforms()`) and metadata. `pretrained=` still works through a compatibility
    layer that warns and will be removed.

    ## Example
    ```python
    from torchvision import models

    model = models.resnet50(pretrained=True)
    ```

    ## Use instead
    ```python
    from torchvision import models

    model = models.resnet50(weights=models.ResNet50_Weights.IMAGENET1K_V1)
    ```

    ## Fix safety
    Safe: `pretrained=True` becomes the exact weights it loaded (`IMAGENET1K_V1`, `COCO_V1`,
    ...; not `DEFAULT`, which may be a newer checkpoint), `pretrained=False` becomes
    `weights=None`. Values that are not literal `True`/`False` get no fix, nor do models that
    never had pretrained weights.

    ## References
    - [torchvision multi-weight support](https://pytorch.org/vision/stable/models.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR201)
    """

    code = "TDR810"
    name = "torchvision-pretrained"
    severity = Severity.WARNING
    fix_safety = Applicability.SAFE
    tags = ("deprecated",)
    aliases = ("TOR201",)

    VALID = (
        "import torch\nfrom torchvision import models\n"
        "m = models.resnet50(weights=models.ResNet50_Weights.DEFAULT)",
        "import torch\nfrom torchvision.models import resnet18\nm = resnet18(weights=None)",
        # Not torchvision: timm and a local function take `pretrained=` legitimately.
        "import timm\nimport torch\nm = timm.create_model('resnet50', pretrained=True)",
        "import torch\ndef resnet50(pretrained=False):\n    return None\nm = resnet50(pretrained=True)",
        # A torchvision model this rule has no weights for.
        "import torch\nimport torchvision\nm = torchvision.models.get_model('resnet50', weights=None)",
        Valid("import torchvision\nm = torchvision.models.vgg16(weights=None)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torchvision import models\nm = models.resnet50(pretrained=True)",
            fixed="import torch\nfrom torchvision import models\n"
            "m = models.resnet50(weights=models.ResNet50_Weights.IMAGENET1K_V1)",
            lines=(3,),
        ),
        Invalid(
            "import torchvision\nm = torchvision.models.vgg16(pretrained=False)",
            fixed="import torchvision\nm = torchvision.models.vgg16(weights=None)",
            lines=(2,),
        ),
        Invalid(
            "from torchvision.models import resnet18\nm = resnet18(pretrained=True)",
            fixed="import torchvision\nfrom torchvision.models import resnet18\n"
            "m = resnet18(weights=torchvision.models.ResNet18_Weights.IMAGENET1K_V1)",
            lines=(2,),
        ),
        Invalid(
            "import torchvision.models as tvm\n"
            "m = tvm.detection.fasterrcnn_resnet50_fpn(pretrained=True, pretrained_backbone=True)",
            fixed="import torchvision.models as tvm\n"
            "m = tvm.detection.fasterrcnn_resnet50_fpn("
            "weights=tvm.detection.FasterRCNN_ResNet50_FPN_Weights.COCO_V1, "
            "weights_backbone=tvm.ResNet50_Weights.IMAGENET1K_V1)",
            lines=(2,),
        ),
        Invalid(
            "from torchvision.models.resnet import resnet50\nm = resnet50(True)",
            fixed="import torchvision\nfrom torchvision.models.resnet import resnet50\n"
            "m = resnet50(weights=torchvision.models.ResNet50_Weights.IMAGENET1K_V1)",
            lines=(2,),
        ),
        Invalid(
            "import torchvision\nm = torchvision.models.resnet50(pretrained=args.pretrained)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torchvision\nm = torchvision.models.vit_h_14(pretrained=True)",
            fixed=None,
            lines=(2,),
        ),
        # Already passes `weights=`: a fix would repeat the keyword.
        Invalid(
            "import torchvision\nm = torchvision.models.resnet18(pretrained=False, weights=None)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torchvision\nm = torchvision.models.alexnet(pretrained=True)\n",
            fixed="import torchvision\n"
            "m = torchvision.models.alexnet(weights=torchvision.models.AlexNet_Weights.IMAGENET1K_V1)\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        if "torchvision" not in ctx.source.text:
            return
        for call in ctx.sem.calls:
            if not call.args and not call.keywords:
                continue
            key = model_key(ctx.qualname(call.func))
            if key is None:
                continue
            main = self._argument(call, "pretrained", 0)
            backbone = (
                self._argument(call, "pretrained_backbone", 1) if key in HAS_BACKBONE else None
            )
            if main is None and backbone is None:
                continue
            old = "pretrained_backbone" if main is None else "pretrained"
            new = "weights_backbone" if main is None else "weights"
            ctx.report(
                call,
                Text(
                    f"`{old}=` is deprecated in torchvision: pass `{new}=` (a weights enum)",
                    f"torchvision 中的 `{old}=` 已弃用：请传入 `{new}=`（权重枚举）",
                ),
                fixes=partial(self._fix, ctx, call, key, main, backbone),
            )

    @staticmethod
    def _argument(call: ast.Call, name: str, position: int) -> ast.expr | ast.keyword | None:
        for kw in call.keywords:
            if kw.arg == name:
                return kw
        if len(call.args) > position and not any(
            isinstance(a, ast.Starred) for a in call.args[: position + 1]
        ):
            return call.args[position]
        return None

    def _fix(
        self,
        ctx: Context,
        call: ast.Call,
        key: str,
        main: ast.expr | ast.keyword | None,
        backbone: ast.expr | ast.keyword | None,
    ) -> Fix | None:
        if any(k.arg in ("weights", "weights_backbone") or k.arg is None for k in call.keywords):
            return None  # never pass a keyword twice
        weights, backbone_weights = WEIGHTS[key]
        task = key.split(".")[0] + "." if "." in key else ""
        edits: list[Edit] = []
        for node, new, enum in (
            (main, "weights", f"{task}{weights}" if weights else None),
            (backbone, "weights_backbone", backbone_weights),
        ):
            if node is None:
                continue
            value = node.value if isinstance(node, ast.keyword) else node
            if not isinstance(value, ast.Constant) or not isinstance(value.value, bool):
                return None
            if isinstance(node, ast.expr) and any(
                (a.lineno, a.col_offset) > (node.lineno, node.col_offset) for a in call.args
            ):
                return None  # a positional argument follows: keep positions as they are
            if value.value:
                if enum is None:
                    return None
                spelled = spell(ctx, call.func, _PREFIX + enum)
                if spelled is None:
                    return None
                text, more = spelled
                edits.extend(more)
            else:
                text = "None"
            edits.append(fixes.replace(ctx.source, node, f"{new}={text}"))
        if not edits:
            return None
        # Two spellings may each add the same import: keep one.
        unique = list(dict.fromkeys(edits))
        return Fix(
            Text(
                "Pass `weights=` instead of `pretrained=`",
                "改为传入 `weights=` 而不是 `pretrained=`",
            ),
            tuple(unique),
            Applicability.SAFE,
        )
