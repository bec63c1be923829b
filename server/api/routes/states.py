"""State files over HTTP: ``GET /v1/tasks/{id}/export_state``, ``POST /v1/tasks/import_state``.

Export answers the task's state as a file (``application/octet-stream``, the exported-state
format of ``server/task/state_file.py``); 409 while the task runs or when its state was not kept.
Import takes the file as the request body (a state-tuning ``.pth`` or an exported state) and
stores it as the read-only template ``_name``: fork it (``POST /v1/tasks/_name/fork``) or name it
in OpenAI requests (``"model": "rwkv-7:_name"``). A body may take the larger of
``RWKV_MAX_BODY_BYTES`` and the loaded model's state size + 16 MiB (``app._state_file_room``: a
2.9B state is ~21 MB, past the default 8 MiB). Errors: 400 unreadable file, 422 a file that
does not fit the loaded model (the message names the tensor and the shapes) or whose state
makes the model's output NaN or infinite (``TaskService.trial``: a few tokens are generated
from it before it is stored),
409 name taken (or ``RWKV_MAX_TEMPLATES`` templates stored), 503 queue full or shutting down.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response

from server.api.routes.tasks import NOT_FOUND, RESUMED, get_service
from server.api.safe_json import SafeJSONResponse
from server.api.schemas.tasks import GenerationParams
from server.api.task_service import TaskService
from server.task.policy import loaded_digest
from server.task.state_file import (StateFileError, StateShapeError, check_lengths,
                                    check_range, check_weights, read_state_file)
from server.task.state_templates import export_state, template_name, template_task

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])
_FILE = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


@router.get("/{task_id}/export_state", response_class=Response,
            responses={200: {"content": _FILE, "description": "The state file"}, **NOT_FOUND,
                       409: RESUMED[409]})
async def export_task_state(task_id: str, svc: TaskService = Depends(get_service)):
    """The task's recurrent state (and the tokens it consumed) as a file."""
    task = await svc.get(task_id)
    svc.check_usable(task)
    data = await svc.unheld(export_state, task, svc.loader.cfg)
    return Response(data, media_type="application/octet-stream", headers={
        "Content-Disposition": f'attachment; filename="{task_id}.safetensors"'})


@router.post("/import_state", response_class=SafeJSONResponse, responses={
    200: {"description": "The new template"}, 400: {"description": "Unreadable file"},
    409: {"description": "Template name taken, or RWKV_MAX_TEMPLATES reached"},
    413: {"description": "Body too large"},
    422: {"description": "The state does not fit the loaded model"}})
async def import_task_state(
        request: Request,
        name: str = Query(..., description="template id (a leading '_' is added if missing)"),
        layout: str = Query("vk", pattern="^(vk|kv)$",
                            description="time_state rows: vk = value rows (RWKV-PEFT v7)"),
        svc: TaskService = Depends(get_service)):
    """Store the state file sent as the body as the read-only template ``_name``."""
    try:
        tid = template_name(name)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    await svc.check_template_room()
    data = await request.body()
    if not data:
        raise HTTPException(400, "Empty body: send the state file as the request body")
    try:
        sf = await svc.store(read_state_file, data, svc.loader.cfg, layout)
        model = svc.loader.model
        check_range(sf, model.dtype, model.state_dtype)
        check_lengths(sf, svc.settings.max_prompt_tokens)
        check_weights(sf, loaded_digest(svc.loader))
    except StateFileError as e:
        status = 422 if isinstance(e, StateShapeError) else 400
        raise HTTPException(status, f"Cannot import the state: {e}") from None
    task = template_task(tid, sf, svc.sampling(GenerationParams(), defaults=True),
                         digest=loaded_digest(svc.loader) or sf.digest)
    problem = await svc.trial(task, request)
    if problem is not None:
        raise HTTPException(422, f"Cannot import the state: a token generated from it failed "
                                 f"({problem}); its values are out of the model's range")
    await svc.put_template(task)
    return {"task_id": tid, "format": sf.kind, "layers": svc.loader.cfg.n_layer,
            "history_tokens": len(sf.history)}
