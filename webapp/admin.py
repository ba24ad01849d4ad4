"""Admin: clusters with their nodes inline, nodes with their GPUs inline, node import."""
from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.urls import path, reverse

from .importers import MAX_NODE_FILE_BYTES, NodeImportError, parse_text
from .models import Cluster, Experiment, GPUDevice, Job, Node
from .services import nodes_import


class GPUInline(admin.TabularInline):
    model = GPUDevice
    extra = 0
    fields = ["index", "model", "memory_mib", "uuid", "utilisation_percent"]


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    fields = ["name", "cpu_cores", "memory_mib", "labels", "taints", "last_heartbeat"]
    show_change_link = True  # GPUs are edited inline on the node's page


class NodeImportForm(forms.Form):
    cluster = forms.CharField(max_length=128, help_text="Cluster to import into (created if missing)")
    format = forms.ChoiceField(choices=[("auto", "by extension"), ("k8s", "Kubernetes v1 Node YAML"), ("pai", "PAI machine-spec CSV")])
    file = forms.FileField()


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "region", "node_count"]
    search_fields = ["name", "region"]
    list_filter = ["kind"]
    inlines = [NodeInline]
    actions = ["import_nodes_action"]
    change_list_template = "admin/webapp/cluster/change_list.html"

    @admin.display(description="nodes")
    def node_count(self, obj):
        return obj.nodes.count()

    @admin.action(description="Import nodes (Kubernetes YAML or PAI CSV) into the selected cluster")
    def import_nodes_action(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one cluster to import into.", messages.ERROR)
            return None
        return redirect(f"{reverse('admin:webapp_cluster_import_nodes')}?cluster={queryset.get().name}")

    def get_urls(self):
        return [path("import-nodes/", self.admin_site.admin_view(self.import_nodes_view), name="webapp_cluster_import_nodes"), *super().get_urls()]

    def import_nodes_view(self, request):
        """Upload a node file; all or nothing (one transaction), errors shown on the form."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        too_big = int(request.META.get("CONTENT_LENGTH") or 0) > MAX_NODE_FILE_BYTES + 2**20
        if request.method == "POST" and too_big:  # refused before the body is read or spooled to disk
            form = NodeImportForm(initial={"cluster": request.GET.get("cluster", "")})
            form.errors["file"] = form.error_class([
                f"Nothing imported: the upload is over the {MAX_NODE_FILE_BYTES // 2**20} MiB limit for node files"])
            ctx = {**self.admin_site.each_context(request), "form": form, "title": "Import nodes", "opts": self.model._meta}
            return render(request, "admin/webapp/cluster/import_nodes.html", ctx, status=413)
        form = NodeImportForm(request.POST or None, request.FILES or None, initial={"cluster": request.GET.get("cluster", "")})
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            fmt = form.cleaned_data["format"]
            name = upload.name or "upload"
            if fmt == "auto":
                fmt = "pai" if name.lower().endswith(".csv") else "k8s"
            try:
                if upload.size > MAX_NODE_FILE_BYTES:  # refused before reading it (Django spooled it to disk)
                    raise NodeImportError(f"{name}: {upload.size / 2**20:.1f} MiB; node files are limited to "
                                          f"{MAX_NODE_FILE_BYTES // 2**20} MiB")
                text = upload.read().decode("utf-8")
                specs = parse_text(text, fmt=fmt, source=name)
                summary = nodes_import(cluster_name=form.cleaned_data["cluster"],
                                       cluster_kind=Cluster.Kind.PAI if fmt == "pai" else Cluster.Kind.KUBERNETES, specs=specs)
            except (NodeImportError, UnicodeDecodeError, ValueError) as err:
                form.add_error("file", f"Nothing imported: {err}")
            else:
                self.message_user(request, f"Imported into {form.cleaned_data['cluster']}: {summary['nodes_created']} nodes created, "
                                  f"{summary['nodes_updated']} updated, {summary['gpus']} GPUs.", messages.SUCCESS)
                return redirect("admin:webapp_cluster_changelist")
        ctx = {**self.admin_site.each_context(request), "form": form, "title": "Import nodes", "opts": self.model._meta}
        return render(request, "admin/webapp/cluster/import_nodes.html", ctx)


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "cpu_cores", "memory_mib", "gpu_count", "last_heartbeat"]
    list_filter = ["cluster"]
    search_fields = ["name"]
    inlines = [GPUInline]

    @admin.display(description="GPUs")
    def gpu_count(self, obj):
        return obj.gpus.count()


@admin.register(GPUDevice)
class GPUDeviceAdmin(admin.ModelAdmin):
    list_display = ["__str__", "model", "memory_mib", "uuid", "utilisation_percent"]
    list_filter = ["model", "node__cluster"]
    list_select_related = ["node__cluster"]  # __str__ names node and cluster: no query per row
    search_fields = ["node__name", "node__cluster__name", "model", "uuid"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner", "model_name", "batch_size", "num_gpus", "state", "progress", "created_at"]
    list_filter = ["state", "model_name"]
    list_select_related = ["owner"]
    # At the demo's scale (6,748 GPUs) a <select> of every GPU made this page take 13-17 s
    # (issue 21): ids in a text box with a lookup pop-up instead.
    raw_id_fields = ["gpus", "cluster", "owner"]
    readonly_fields = ["state", "progress", "result", "error", "attempts", "dispatched_at", "started_at", "finished_at"]


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "kind", "owner", "state", "progress", "created_at"]
    list_filter = ["state", "kind"]
    readonly_fields = ["state", "progress", "progress_message", "result", "error", "attempts", "started_at", "finished_at"]
