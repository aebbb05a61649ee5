"""The caller's saved views of the runs list and the inbox (their own only)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, validated
from common.api.errors import error_responses
from common.errors import NotFound
from runs import permissions as perms
from runs.accounts.api import saved_view_serializers as sb
from runs.accounts.models.saved_views import SavedView
from runs.accounts.services.saved_views import saved_view_save

VIEW_ID = OpenApiParameter("view_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Id.")


class SavedViewListView(ApiView):
    required_perms = {"GET": perms.VIEW, "POST": perms.VIEW}

    @extend_schema(
        operation_id="saved_views_list",
        summary="Your saved views",
        description="The views you saved of the runs list and the inbox, by page and name.",
        tags=["saved views"],
        parameters=[sb.SavedViewQuerySerializer],
        responses={200: sb.SavedViewPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(sb.SavedViewQuerySerializer, request.query_params)
        views = SavedView.objects.filter(user=request.user).order_by("page", "name")
        if query.get("page"):
            views = views.filter(page=query["page"])
        return Response({"items": sb.SavedViewSerializer(views, many=True).data})

    @extend_schema(
        operation_id="saved_views_create",
        summary="Save a view",
        description="`query` is the page's query string; only its filter parameters are "
        "kept (never a cursor). A name you already gave a view of the page replaces that "
        "view's filters (HTTP 200); a new one is 201.",
        tags=["saved views"],
        request=sb.SavedViewSerializer,
        responses={
            201: OpenApiResponse(sb.SavedViewSerializer, description="Saved."),
            200: OpenApiResponse(sb.SavedViewSerializer, description="Replaced."),
            **error_responses(body=True),
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(sb.SavedViewSerializer, request.data)
        view, created = saved_view_save(
            user=request.user,
            page=data["page"],
            name=data["name"],
            query=data.get("query") or "",
        )
        return Response(sb.SavedViewSerializer(view).data, status=201 if created else 200)


class SavedViewDetailView(ApiView):
    required_perms = {"DELETE": perms.VIEW}

    @extend_schema(
        operation_id="saved_views_delete",
        summary="Delete one of your saved views",
        tags=["saved views"],
        parameters=[VIEW_ID],
        responses={204: None, **error_responses(404)},
    )
    def delete(self, request: Request, view_id: int) -> Response:
        deleted, _ = SavedView.objects.filter(pk=view_id, user=request.user).delete()
        if not deleted:  # another user's view is not found either
            raise NotFound(f"saved view {view_id} not found")
        return Response(status=204)
