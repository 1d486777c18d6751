"""Project folders: ``dtables.yml`` + SQL files for sources, dynamic tables and streams, with Jinja templating."""

from dtables.project.config import ProjectConfig, load_config
from dtables.project.loader import DynamicTableSpec, Project, ProjectError, load_project

__all__ = ["ProjectConfig", "load_config", "Project", "DynamicTableSpec", "ProjectError", "load_project"]
